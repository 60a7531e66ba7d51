# Prints the YaRN inverse frequencies, attention factor and MLA softmax scale
# that transformers computes for the configs in src/model/deepseek_config_test.cc.
# Run with the golden venv: .venv-golden/bin/python tests/python/deepseek/yarn_reference.py
from transformers import DeepseekV3Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS, yarn_apply_mscale
for name, rp, maxpos, theta in [("dsv3", {"rope_type":"yarn","factor":40.0,"original_max_position_embeddings":4096,"beta_fast":32,"beta_slow":1,"mscale":1.0,"mscale_all_dim":1.0,"rope_theta":10000.0}, 163840, 10000.0),
                   ("kimi", {"rope_type":"yarn","factor":32.0,"original_max_position_embeddings":4096,"beta_fast":1.0,"beta_slow":1.0,"mscale":1.0,"mscale_all_dim":1.0,"rope_theta":50000.0}, 131072, 50000.0),
                   ("mscale_only", {"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":64,"rope_theta":10000.0}, 256, 10000.0)]:
    c = DeepseekV3Config(rope_parameters=rp, max_position_embeddings=maxpos)
    inv, af = ROPE_INIT_FUNCTIONS["yarn"](c, "cpu")
    sc = yarn_apply_mscale(c.rope_parameters, c.qk_head_dim ** -0.5)
    print(name, [float(x) for x in inv[[0,1,5,10,16,20,31]]], af, sc)
