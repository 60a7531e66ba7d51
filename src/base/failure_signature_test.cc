#include "base/failure_signature.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace specd {
namespace {

std::string Name(const FailureText& t) {
  const FailureSignature* s = MatchFailureSignature(t);
  return s == nullptr ? "" : std::string(s->name);
}

TEST(FailureSignatureTest, TableNamesAreUniqueAndHinted) {
  std::set<std::string_view> names;
  for (const FailureSignature& s : FailureSignatures()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_FALSE(s.hint.empty()) << s.name;
    EXPECT_FALSE(s.title.empty()) << s.name;
  }
}

TEST(FailureSignatureTest, ArchitectureKeyErrors) {
  // Arch-like keys are recognised without context.
  EXPECT_EQ(Name({"KeyError", "'120a'", "", ""}), "unsupported_gpu_arch");
  EXPECT_EQ(Name({"KeyError", "'sm_120'", "", ""}), "unsupported_gpu_arch");
  EXPECT_EQ(Name({"builtins.KeyError", "'gfx942'", "", ""}), "unsupported_gpu_arch");
  // A small integer needs a lookup by capability / architecture.
  EXPECT_EQ(Name({"KeyError", "12", "", "get_config configs[device_capability[0]]"}),
            "unsupported_gpu_arch");
  EXPECT_EQ(Name({"KeyError", "(12, 0)", "", "TABLE[torch.cuda.get_device_capability()]"}),
            "unsupported_gpu_arch");
  EXPECT_EQ(Name({"KeyError", "12", "", "row = rows[i]"}), "");
  EXPECT_EQ(Name({"KeyError", "'factor'", "", "cfg['rope_scaling']['factor'] device"}), "");
  EXPECT_EQ(Name({"ValueError", "12", "", "capability"}), "");
}

TEST(FailureSignatureTest, KnownMessages) {
  EXPECT_EQ(Name({"RuntimeError", "CUDA error: no kernel image is available for execution on the device", "", ""}),
            "no_kernel_image");
  EXPECT_EQ(Name({"torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB", "", ""}),
            "cuda_oom");
  EXPECT_EQ(Name({"OSError", "[Errno 98] Address already in use", "", ""}), "address_in_use");
  EXPECT_EQ(Name({"RuntimeError", "Error(s) in loading state_dict", "size mismatch for lm_head.weight", ""}),
            "weights_mismatch");
  EXPECT_EQ(Name({"Corruption", "tensor 'wq': expected shape [4096, 4096], found [4096, 1024]", "", ""}),
            "weights_mismatch");
  EXPECT_EQ(Name({"Corruption",
                  "/m/model.safetensors: tensor 'w': data_offsets [0, 9] run past the end of the "
                  "data section (4 bytes)",
                  "", ""}),
            "corrupt_weights_file");
  EXPECT_EQ(Name({"Corruption", "/m/model.safetensors: tensor 'wq': expected shape [8, 8], found [8, 4]",
                  "", ""}),
            "weights_mismatch");
  // SIGKILL alone is "killed"; only OOM evidence makes it "oom_killed".
  EXPECT_EQ(Name({"", "Killed", "", ""}), "killed");
  EXPECT_EQ(Name({"", "failed (exitcode: -9) local_rank: 1 (pid: 2345)", "", ""}), "killed");
  EXPECT_EQ(Name({"", "killed by signal 9 (SIGKILL)", "", ""}), "killed");
  EXPECT_EQ(Name({"", "Out of memory: Killed process 2345 (python3) total-vm:1234kB", "", ""}),
            "oom_killed");
  EXPECT_EQ(Name({"", "killed by signal 9 (SIGKILL)", "oom_kill counter rose", ""}), "oom_killed");
  EXPECT_EQ(Name({"", "Container worker-0 terminated: OOMKilled (exit code 137)", "", ""}), "oom_killed");
  EXPECT_EQ(Name({"", "Sending process 2346 closing signal SIGTERM", "", ""}), "teardown");
  EXPECT_EQ(Name({"", "Received sigquit from a child process. It usually means the child failed.", "", ""}),
            "teardown");
  EXPECT_EQ(Name({"", "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5)", "", ""}),
            "collective_timeout");
  EXPECT_EQ(Name({"RuntimeError", "NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error", "", ""}),
            "nccl_error");
  EXPECT_EQ(Name({"ValueError", "max_model_len must be positive", "", ""}), "");
}

TEST(FailureSignatureTest, Consequences) {
  EXPECT_TRUE(IsConsequence({"DeadlineExceeded", "waiting for rank 1", "", ""}));
  EXPECT_TRUE(IsConsequence({"Unavailable", "shm region closed", "", ""}));
  EXPECT_TRUE(IsConsequence({"Cancelled", "", "", ""}));
  EXPECT_TRUE(IsConsequence({"torch.distributed.elastic.multiprocessing.errors.ChildFailedError", "", "", ""}));
  EXPECT_TRUE(IsConsequence({"BrokenPipeError", "[Errno 32] Broken pipe", "", ""}));
  EXPECT_TRUE(IsConsequence({"", "peer rank 3 died", "", ""}));
  EXPECT_TRUE(IsConsequence({"RuntimeError", "Engine core initialization failed. See root cause above.", "", ""}));
  EXPECT_TRUE(IsConsequence({"", "received sigquit from a child process", "", ""}));
  EXPECT_FALSE(IsConsequence({"NotFound", "tensor 'lm_head.weight' not found", "", ""}));
  EXPECT_FALSE(IsConsequence({"KeyError", "12", "", "capability"}));
  // A real cause that also mentions a peer stays a cause.
  EXPECT_FALSE(IsConsequence({"RuntimeError", "CUDA out of memory while peer rank 2 died", "", ""}));
}

TEST(FailureSignatureTest, MissingRanks) {
  EXPECT_EQ(FindMissingRanks("missing ranks: 2, 5"), (std::vector<int>{2, 5}));
  EXPECT_EQ(FindMissingRanks("allreduce #812: missing rank 3 after 30 s"), (std::vector<int>{3}));
  EXPECT_EQ(FindMissingRanks("monitoredBarrier: Rank 1 failed to pass monitoredBarrier in 600000 ms"),
            (std::vector<int>{1}));
  EXPECT_EQ(FindMissingRanks("ranks 1 and 4 never arrived"), (std::vector<int>{1, 4}));
  EXPECT_EQ(FindMissingRanks("DeadlineExceeded: waiting for rank 7 in barrier #1"), (std::vector<int>{7}));
  EXPECT_EQ(FindMissingRanks("missing ranks: [0, 2]"), (std::vector<int>{0, 2}));
  EXPECT_TRUE(FindMissingRanks("rank 3 finished step 12 in 30 ms").empty());
  EXPECT_TRUE(FindMissingRanks("").empty());
}

TEST(FailureSignatureTest, GroupKeyIgnoresRankIdsOnly) {
  EXPECT_EQ(FailureGroupKey("DistBackendError", "[Rank 3] Watchdog caught collective operation timeout"),
            FailureGroupKey("DistBackendError", "[Rank 5] Watchdog caught collective operation timeout"));
  EXPECT_EQ(FailureGroupKey("", "rank=1 failed on cuda:1"), FailureGroupKey("", "rank=2 failed on cuda:7"));
  EXPECT_NE(FailureGroupKey("KeyError", "12"), FailureGroupKey("KeyError", "13"));
  EXPECT_NE(FailureGroupKey("KeyError", "12"), FailureGroupKey("IndexError", "12"));
}

}  // namespace
}  // namespace specd
