#include "app/rank_launch.h"

#include "base/logging.h"
#include "comm/mpi_communicator.h"
#include "comm/shm_group.h"
#include "launch/supervisor.h"

namespace specd::app {

void AddLaunchFlags(CLI::App* sub, EngineFlags* engine, LaunchFlags* f) {
  sub->add_option("--tp", engine->tp,
                  "Tensor parallelism: number of rank processes (default 1); with --comm mpi "
                  "the ranks are the processes mpirun started");
  sub->add_option("--comm", f->comm,
                  "Transport between ranks: shm (rank processes on this host, default) or mpi "
                  "(run under mpirun; shared memory inside a host, MPI between hosts)");
  sub->add_option("--allreduce-algo", f->allreduce_algo,
                  "one-shot | two-shot | mpi | auto (default: the capability registry decides)");
  sub->add_option("--report-file", f->report_file,
                  "On failure, also write the root-cause report as JSON to this file");
}

namespace {

// Loads this rank's shard, then either drives (rank 0) or follows.
Status RankBody(Communicator* comm, const EngineFlags& ef, const LaunchFlags& lf,
                const std::function<Status(ModelRunner&, Engine&)>& rank0_main,
                RankReporter* reporter) {
  ASSIGN_OR_RETURN(AllreduceAlgo algo, ParseAllreduceAlgo(lf.allreduce_algo));
  comm->SetAllreduceAlgo(algo);
  ASSIGN_OR_RETURN(auto runner, ModelRunner::Create(ToRunnerOptions(ef), comm));
  RETURN_IF_ERROR(comm->Barrier().WithStage("wait for ranks ready"));
  if (reporter) reporter->Ready();
  if (comm->rank() != 0) return RunWorkerLoop(runner.get()).WithStage("worker loop");
  Engine engine(runner.get());
  Status s = rank0_main(*runner, engine);
  Status down = engine.Shutdown();
  return s.ok() ? down : s;
}

}  // namespace

int RunOnRanks(const EngineFlags& ef, const LaunchFlags& lf,
               const std::function<Status(ModelRunner&, Engine&)>& rank0_main) {
  if (lf.comm == "mpi") {
    auto comm = NewMpiCommunicator(MpiOptionsFromEnv());
    if (!comm.ok()) {
      LogStatus(std::move(comm).TakeStatus().WithStage("comm init"));
      return 1;
    }
    SetLogRank((*comm)->rank());
    Status s = RankBody(comm->get(), ef, lf, rank0_main, nullptr);
    if (!s.ok()) {
      LogStatus(s.WithRank((*comm)->rank()));
      return 1;
    }
    return 0;
  }
  if (lf.comm != "shm") {
    LOG_ERROR("launch", "--comm: expected 'shm' or 'mpi', got '{}'", lf.comm);
    return 2;
  }
  if (ef.tp <= 1) {
    auto comm = NewLocalCommunicator();
    Status s = RankBody(comm.get(), ef, lf, rank0_main, nullptr);
    if (!s.ok()) {
      LogStatus(s);
      return 1;
    }
    return 0;
  }
  ShmOptions so = ShmOptionsFromEnv();
  auto group = CreateShmGroup(ef.tp, so);
  if (!group.ok()) {
    LogStatus(std::move(group).TakeStatus().WithStage("comm init"));
    return 1;
  }
  SupervisorOptions sup;
  sup.world = ef.tp;
  sup.report_file = lf.report_file;
  sup.on_all_ready = [&] { LOG_INFO("launch", "all {} ranks ready", ef.tp); };
  return Supervise(sup, [&](int rank, RankReporter& rep) {
    auto comm = JoinShmGroup(**group, rank, so);
    if (!comm.ok()) {
      Status s = std::move(comm).TakeStatus().WithStage("comm init").WithRank(rank);
      LogStatus(s);
      rep.Fail(s);
      return 1;
    }
    Status s = RankBody(comm->get(), ef, lf, rank0_main, &rep);
    if (!s.ok()) {
      s.WithRank(rank);
      LogStatus(s);
      rep.Fail(s);
      return 1;
    }
    return 0;
  });
}

}  // namespace specd::app
