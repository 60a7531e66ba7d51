#include "app/rank_launch.h"

#include <unistd.h>

#include <cstdlib>

#include "base/logging.h"
#include "comm/fault_injection.h"
#include "comm/mpi_communicator.h"
#include "comm/shm_group.h"
#include "launch/cpu_bind.h"
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
  sub->add_option("--cpu-bind", f->cpu_bind,
                  "Pin rank processes to CPUs: none (default), cores (rank r gets --threads "
                  "consecutive CPUs from r x threads), or one CPU list per rank separated by "
                  "':' (e.g. 0:1 or 0-3:4-7)");
  sub->add_option("--comm-spin-us", f->comm_spin_us,
                  "Microseconds a rank waiting in a collective spins before yielding the CPU "
                  "(default 50, env SPECD_COMM_SPIN_US; ranks that outnumber the CPUs never "
                  "spin)")
      ->check(CLI::Range(0.0, 1e6));
  sub->add_option("--report-file", f->report_file,
                  "On failure, also write the root-cause report as JSON to this file");
  sub->footer(
      "Exit status: 0 success; 1 a rank failed or died (report on stderr, root cause first); 2 "
      "bad flags; with --tp N after SIGINT/SIGTERM, 0 when every rank shut down cleanly (serve "
      "shuts down gracefully), else 128 + the signal number.\n"
      "Test hook: SPECD_FAULT_KILL_RANK=R:N makes rank R raise SIGKILL at its N-th collective.");
}

namespace {

// This host's rank index (mpirun sets OMPI_COMM_WORLD_LOCAL_RANK).
int LocalRank(int rank, const std::string& comm) {
  if (comm == "mpi") {
    if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"); v && *v) return std::atoi(v);
  }
  return rank;
}

// Loads this rank's shard, then either drives (rank 0) or follows.
Status RankBody(Communicator* comm, const ResolvedEngineOptions& ef, const LaunchFlags& lf,
                const std::vector<std::vector<int>>& cpus, const RankJob& job,
                RankReporter* reporter) {
  ASSIGN_OR_RETURN(AllreduceAlgo algo, ParseAllreduceAlgo(lf.allreduce_algo));
  comm->SetAllreduceAlgo(algo);
  // Test hook (comm/fault_injection.h); declared before the runner that uses it.
  std::unique_ptr<Communicator> fault = NewFaultInjectingCommunicator(comm);
  if (fault) comm = fault.get();
  // Pin before any thread starts (the HTTP server's, the thread pool's), so
  // they all inherit it.
  const int local = LocalRank(comm->rank(), lf.comm);
  if (local >= 0 && local < static_cast<int>(cpus.size()) && !cpus[local].empty()) {
    RETURN_IF_ERROR(launch::BindThisProcess(cpus[local]).WithStage("cpu bind"));
    LOG_INFO("launch", "rank {} pinned to CPUs {}", comm->rank(), launch::FormatCpuList(cpus[local]));
  }
  if (comm->rank() == 0 && job.rank0_prepare) RETURN_IF_ERROR(job.rank0_prepare(reporter));
  ASSIGN_OR_RETURN(auto runner, ModelRunner::Create(ef.runner, comm));
  RETURN_IF_ERROR(comm->Barrier().WithStage("wait for ranks ready"));
  if (reporter) reporter->Ready();
  LOG_INFO("launch", "rank {} ready (pid {})", comm->rank(), static_cast<int>(::getpid()));
  if (comm->rank() != 0) return RunWorkerLoop(runner.get()).WithStage("worker loop");
  Engine engine(runner.get());
  Status s = job.rank0_main(*runner, engine);
  Status down = engine.Shutdown();
  return s.ok() ? down : s;
}

}  // namespace

int RunOnRanks(const ResolvedEngineOptions& ef, const LaunchFlags& lf,
               const std::function<Status(ModelRunner&, Engine&)>& rank0_main) {
  RankJob job;
  job.rank0_main = rank0_main;
  return RunOnRanks(ef, lf, job);
}

int RunOnRanks(const ResolvedEngineOptions& ef, const LaunchFlags& lf, const RankJob& job) {
  if (lf.comm != "shm" && lf.comm != "mpi") {
    LOG_ERROR("launch", "--comm: expected 'shm' or 'mpi', got '{}'", lf.comm);
    return 2;
  }
  if (ef.tp < 1) {
    LOG_ERROR("launch", "--tp: expected a number of ranks >= 1, got {}", ef.tp);
    return 2;
  }
  const int threads = ef.runner.threads;
  std::vector<std::vector<int>> cpus;
  auto plan_for = [&](int world) -> bool {
    auto p = launch::PlanCpuBinding(lf.cpu_bind, world, threads, launch::AllowedCpus());
    if (!p.ok()) {
      LogStatus(p.status());
      return false;
    }
    cpus = std::move(p).value();
    return true;
  };
  if (lf.comm == "mpi") {
    MpiOptions mo = MpiOptionsFromEnv();
    if (lf.comm_spin_us >= 0) mo.shm.spin_us = lf.comm_spin_us;
    auto comm = NewMpiCommunicator(mo);
    if (!comm.ok()) {
      LogStatus(std::move(comm).TakeStatus().WithStage("comm init"));
      return 1;
    }
    SetLogRank((*comm)->rank());
    // Bind by the local rank: every host plans for the ranks it may hold.
    if (!plan_for((*comm)->world_size())) return 2;
    Status s = RankBody(comm->get(), ef, lf, cpus, job, nullptr);
    if (!s.ok()) {
      LogStatus(s.WithRank((*comm)->rank()));
      return 1;
    }
    return 0;
  }
  if (!plan_for(ef.tp)) return 2;
  if (job.max_restarts < 0) {
    LOG_ERROR("launch", "--restart-ranks: expected a count >= 0, got {}", job.max_restarts);
    return 2;
  }
  const bool supervised = ef.tp > 1 || job.max_restarts > 0 || job.proxy.has_value();
  if (!supervised) {
    auto comm = NewLocalCommunicator();
    Status s = RankBody(comm.get(), ef, lf, cpus, job, nullptr);
    if (!s.ok()) {
      LogStatus(s);
      return 1;
    }
    return 0;
  }
  ShmOptions so = ShmOptionsFromEnv();
  if (lf.comm_spin_us >= 0) so.spin_us = lf.comm_spin_us;
  // One shared-memory group per rank group: a failed group's flags and
  // liveness locks are not reused (the memfd has no name, so nothing leaks).
  std::unique_ptr<ShmGroup> group;
  auto create_group = [&]() -> Status {
    group.reset();
    if (ef.tp == 1) return Status::Ok();
    ASSIGN_OR_RETURN(group, CreateShmGroup(ef.tp, so));
    return Status::Ok();
  };
  if (Status s = create_group(); !s.ok()) {
    LogStatus(s.WithStage("comm init"));
    return 1;
  }
  std::unique_ptr<launch::ServeProxy> proxy;
  if (job.proxy) {
    auto p = launch::ServeProxy::Create(*job.proxy);
    if (!p.ok()) {
      LogStatus(std::move(p).TakeStatus().WithStage("listen"));
      return 1;
    }
    proxy = std::move(p).value();
    LOG_INFO("serve", "listening on http://{}:{} (forwarding to rank 0)", job.proxy->listen.host,
             proxy->port());
  }
  SupervisorOptions sup;
  sup.world = ef.tp;
  sup.report_file = lf.report_file;
  sup.rank0_stop_s = job.rank0_stop_s;
  sup.max_restarts = job.max_restarts;
  sup.on_all_ready = [&] { LOG_INFO("launch", "all {} ranks ready", ef.tp); };
  sup.before_restart = [&] { return create_group().WithStage("comm init"); };
  if (proxy) {
    sup.in_child = [] { launch::CloseInheritedSockets(); };
    sup.poll = [&](pollfd* fds, size_t n, int timeout_ms) {
      return proxy->Poll(fds, n, timeout_ms);
    };
    sup.on_rank_serving = [&](int rank, const std::string& address) {
      if (rank != 0) return;
      char* end = nullptr;
      const long port = std::strtol(address.c_str(), &end, 10);
      if (address.empty() || *end != '\0' || port <= 0 || port > 65535) {
        LOG_ERROR("serve", "rank 0 reported an invalid port '{}'", address);
        return;
      }
      proxy->SetUpstream(static_cast<int>(port));
    };
    sup.on_group_failed = [&](const std::string& cause, bool restarting) {
      proxy->GroupFailed(cause, restarting);
    };
    sup.on_stopping = [&] { proxy->Stopping(); };
  }
  const int code = Supervise(sup, [&](int rank, RankReporter& rep) {
    auto comm = ef.tp == 1 ? StatusOr<std::unique_ptr<Communicator>>(NewLocalCommunicator())
                           : JoinShmGroup(*group, rank, so);
    if (!comm.ok()) {
      Status s = std::move(comm).TakeStatus().WithStage("comm init").WithRank(rank);
      LogStatus(s);
      rep.Fail(s);
      return 1;
    }
    Status s = RankBody(comm->get(), ef, lf, cpus, job, &rep);
    if (!s.ok()) {
      s.WithRank(rank);
      LogStatus(s);
      rep.Fail(s);
      return 1;
    }
    return 0;
  });
  // Let the last events (a stream's error and [DONE]) reach the clients.
  if (proxy) proxy->Drain(2.0);
  return code;
}

}  // namespace specd::app
