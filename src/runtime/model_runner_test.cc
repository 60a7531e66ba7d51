// ModelRunner::Execute is what every rank runs on a step descriptor; Engine
// is rank 0's side. Steps that do not fit the rank's state are refused with
// an error, never applied halfway, and a descriptor that went through the
// wire format runs exactly as the one rank 0 built.
#include "runtime/model_runner.h"

#include <gtest/gtest.h>

#include "runtime/engine.h"
#include "runtime/tiny_model_test_util.h"

namespace specd {
namespace {

class ModelRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RunnerOptions ro;
    ro.model_path = testing_util::TinyModelPath();
    auto r = ModelRunner::Create(ro, comm_.get());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runner_ = std::move(r).value();
  }
  StepDesc Step(std::vector<KvEdit> edits, int seq, std::vector<int32_t> tokens) {
    StepDesc d;
    d.kv_edits = std::move(edits);
    if (!tokens.empty()) d.batch.push_back(SeqInput{seq, std::move(tokens), {}, {}, false});
    return d;
  }
  std::unique_ptr<Communicator> comm_ = NewLocalCommunicator();
  std::unique_ptr<ModelRunner> runner_;
};

TEST_F(ModelRunnerTest, ForwardOnASequenceThatDoesNotExistIsRefused) {
  ForwardOutput out;
  Status s = runner_->Execute(Step({}, 3, {1, 2}), &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("sequence 3"), std::string::npos) << s.message();
  EXPECT_EQ(runner_->kv().used_pages(), 0);
}

TEST_F(ModelRunnerTest, ABadEditStopsTheStepBeforeItsForward) {
  ForwardOutput out;
  ASSERT_TRUE(runner_->Execute(Step({KvEdit::NewSequence(0)}, 0, {1, 2, 3}), &out).ok());
  ASSERT_EQ(runner_->kv().Length(0), 3);
  // Accepted path past the sequence's end: refused, and the batch does not run.
  Status s = runner_->Execute(Step({KvEdit::KeepPath(0, 2, {0, 5})}, 0, {4}), &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(runner_->kv().Length(0), 3);
}

TEST_F(ModelRunnerTest, WireFormatRunsLikeTheOriginalAndEngineMatchesExecute) {
  const int V = runner_->config().vocab_size;
  StepDesc d = Step({KvEdit::NewSequence(0)}, 0, {5, 6, 7, 8});
  auto wire = DeserializeStep(SerializeStep(d));
  ASSERT_TRUE(wire.ok()) << wire.status().ToString();
  ForwardOutput direct, via_wire;
  ASSERT_TRUE(runner_->Execute(d, &direct).ok());
  ASSERT_TRUE(runner_->Execute(Step({KvEdit::FreeSequence(0)}, 0, {}), &via_wire).ok());
  ASSERT_TRUE(runner_->Execute(*wire, &via_wire).ok());
  ASSERT_EQ(direct.logits.size(), static_cast<size_t>(V));
  EXPECT_EQ(direct.logits, via_wire.logits);
  ASSERT_TRUE(runner_->Execute(Step({KvEdit::FreeSequence(0)}, 0, {}), &via_wire).ok());

  // Rank 0's Engine: the same forward; an edit it refuses is not queued.
  Engine engine(runner_.get());
  const int seq = engine.NewSequence();
  ForwardOutput out;
  SeqInput in{seq, {5, 6, 7, 8}, {}, {}, false};
  ASSERT_TRUE(engine.Forward({in}, false, &out).ok());
  EXPECT_EQ(out.logits, direct.logits);
  EXPECT_FALSE(engine.Apply(KvEdit::Truncate(seq, 9)).ok());
  EXPECT_TRUE(engine.Apply(KvEdit::Truncate(seq, 2)).ok());
  EXPECT_EQ(engine.kv().Length(seq), 2);
  engine.FreeSequence(seq);
  EXPECT_EQ(engine.kv().used_pages(), 0);
}

}  // namespace
}  // namespace specd
