#include "commbench/comm_bench.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/logging.h"
#include "comm/mpi_communicator.h"
#include "comm/reduce_kernels.h"
#include "comm/shm_group.h"
#include "platform/capability_registry.h"

namespace specd {
namespace {

constexpr int kVerifyAllreducesPerStep = 123;  // 61 layers x 2 + 1
constexpr int kVerifyTokens[] = {4, 8};
constexpr size_t kSharedBytes = 8u << 20;  // rank 0's JSON rows from a forked run

// One measured configuration.
struct Case {
  size_t bytes = 0;  // reported message size
  size_t count = 0;  // elements per call (allgather: per rank)
  int rows = 0;      // fused
  int calls = 1;     // calls per timed iteration (verify: 123)
};

std::vector<Case> MakeCases(const CommBenchOptions& o, int world) {
  std::vector<Case> cases;
  if (o.workload == "verify") {
    for (int t : kVerifyTokens) {
      Case c;
      c.count = static_cast<size_t>(t) * o.hidden;
      c.bytes = c.count * 2;
      c.calls = kVerifyAllreducesPerStep;
      cases.push_back(c);
    }
    return cases;
  }
  const size_t es = CommDTypeBytes(o.dtype);
  for (size_t s : o.sizes) {
    Case c;
    if (o.op == "fused-rmsnorm") {
      const size_t row = static_cast<size_t>(o.hidden) * 4;
      c.rows = static_cast<int>(std::max<size_t>(1, s / row));
      c.count = c.rows * static_cast<size_t>(o.hidden);
      c.bytes = c.count * 4;
    } else if (o.op == "allgather") {
      c.count = std::max<size_t>(1, s / es / world);
      c.bytes = c.count * es * world;
    } else {
      c.count = std::max<size_t>(1, s / es);
      c.bytes = c.count * es;
    }
    cases.push_back(c);
  }
  return cases;
}

std::string OpLabel(const CommBenchOptions& o) {
  return o.workload == "verify" ? "verify-step" : o.op;
}
CommDType OpDType(const CommBenchOptions& o) {
  if (o.workload == "verify") return CommDType::kBF16;
  return o.op == "fused-rmsnorm" ? CommDType::kF32 : o.dtype;
}

std::string AlgoLabel(const CommBenchOptions& o, const Communicator& comm, size_t bytes) {
  if (o.op == "allgather" && o.workload.empty()) return "direct";
  if (comm.backend_name() == "mpi") return "mpi";
  if (o.algo != AllreduceAlgo::kAuto) return AllreduceAlgoName(o.algo);
  return std::string("auto:") +
         AllreduceKindName(PlanAllreduce(DetectPlatformKey(), comm.world_size(), bytes).kind);
}

// Times every case on this rank: lat[case * iters + iter] in microseconds.
Status TimeCases(Communicator& comm, const CommBenchOptions& o, const std::vector<Case>& cases,
                 std::vector<float>* lat) {
  size_t max_count = 1;
  for (const Case& c : cases) max_count = std::max(max_count, c.count);
  const int world = comm.world_size();
  const size_t out_count = o.op == "allgather" && o.workload.empty() ? max_count * world : max_count;
  // Small values keep repeated sums finite; f32 storage also holds bf16.
  std::vector<float> in(max_count, 1e-3f), out(out_count, 0.0f), residual(max_count, 0.5f),
      weight(std::max(o.hidden, 1), 1.0f);
  lat->assign(cases.size() * o.iters, 0.0f);
  const CommDType dtype = OpDType(o);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    auto run_once = [&]() -> Status {
      for (int k = 0; k < c.calls; ++k) {
        if (o.op == "fused-rmsnorm" && o.workload.empty()) {
          RETURN_IF_ERROR(comm.AllReduceResidualRmsNorm(in.data(), residual.data(), weight.data(),
                                                        1e-6f, c.rows, o.hidden, out.data()));
        } else if (o.op == "allgather" && o.workload.empty()) {
          RETURN_IF_ERROR(comm.AllGather(in.data(), out.data(), c.count, dtype));
        } else {
          RETURN_IF_ERROR(comm.AllReduce(in.data(), out.data(), c.count, dtype));
        }
      }
      return Status::Ok();
    };
    RETURN_IF_ERROR(comm.Barrier());
    for (int i = 0; i < o.warmup; ++i) RETURN_IF_ERROR(run_once());
    RETURN_IF_ERROR(comm.Barrier());
    for (int i = 0; i < o.iters; ++i) {
      const int64_t t0 = NowNanos();
      RETURN_IF_ERROR(run_once());
      (*lat)[ci * o.iters + i] = static_cast<float>((NowNanos() - t0) * 1e-3);
    }
  }
  return Status::Ok();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t idx = static_cast<size_t>(std::ceil(p * v.size())) - 1;
  return v[std::min(idx, v.size() - 1)];
}

double BusBwGbs(const CommBenchOptions& o, const Case& c, int world, double us) {
  if (us <= 0) return 0;
  const double algbw = static_cast<double>(c.bytes) * c.calls / (us * 1e-6) / 1e9;
  if (o.op == "allgather" && o.workload.empty()) return algbw * (world - 1) / world;
  return algbw * 2.0 * (world - 1) / world;
}

// Times every case on every rank and turns the per-iteration maximum over
// ranks into rows (valid on rank 0).
StatusOr<std::vector<CommBenchRow>> MeasureRows(Communicator& comm, const std::string& backend,
                                                const CommBenchOptions& o) {
  const int world = comm.world_size();
  const std::vector<Case> cases = MakeCases(o, world);
  std::vector<float> lat;
  RETURN_IF_ERROR(TimeCases(comm, o, cases, &lat));
  std::vector<float> all(lat.size() * world);
  RETURN_IF_ERROR(comm.AllGather(lat.data(), all.data(), lat.size(), CommDType::kF32));
  std::vector<CommBenchRow> rows;
  if (comm.rank() != 0) return rows;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    std::vector<double> worst(o.iters, 0.0);
    for (int r = 0; r < world; ++r) {
      for (int i = 0; i < o.iters; ++i) {
        worst[i] = std::max<double>(worst[i], all[r * lat.size() + ci * o.iters + i]);
      }
    }
    CommBenchRow row;
    row.backend = backend;
    row.op = OpLabel(o);
    row.dtype = CommDTypeName(OpDType(o));
    row.bytes = cases[ci].bytes;
    row.algo = AlgoLabel(o, comm, cases[ci].bytes);
    row.median_us = Percentile(worst, 0.5);
    row.p99_us = Percentile(worst, 0.99);
    row.busbw_gbs = BusBwGbs(o, cases[ci], world, row.median_us);
    rows.push_back(row);
  }
  return rows;
}

// One write of S plus N reads of S (summed into an output), single core.
std::vector<CommBenchRow> MeasureFloor(const CommBenchOptions& o, int world) {
  std::vector<CommBenchRow> rows;
  if (o.op == "allgather" && o.workload.empty()) return rows;
  const CommDType dtype = OpDType(o);
  const size_t es = CommDTypeBytes(dtype);
  for (const Case& c : MakeCases(o, world)) {
    const size_t bytes = c.count * es;
    std::vector<std::vector<char>> slots(world, std::vector<char>(bytes, 0));
    std::vector<char> src(bytes, 1), out(bytes);
    std::vector<const char*> srcs(world);
    for (int r = 0; r < world; ++r) srcs[r] = slots[r].data();
    std::vector<double> t(o.iters);
    for (int i = -o.warmup; i < o.iters; ++i) {
      const int64_t t0 = NowNanos();
      for (int k = 0; k < c.calls; ++k) {
        std::memcpy(slots[0].data(), src.data(), bytes);
        if (dtype == CommDType::kF32) {
          comm_internal::SumRanksF32(reinterpret_cast<const float* const*>(srcs.data()), world,
                                     reinterpret_cast<float*>(out.data()), c.count);
        } else {
          comm_internal::SumRanksBF16(reinterpret_cast<const uint16_t* const*>(srcs.data()), world,
                                      reinterpret_cast<uint16_t*>(out.data()), c.count);
        }
      }
      if (i >= 0) t[i] = (NowNanos() - t0) * 1e-3;
    }
    CommBenchRow row;
    row.backend = "floor";
    row.op = OpLabel(o);
    row.dtype = CommDTypeName(dtype);
    row.bytes = c.bytes;
    row.algo = "memcpy";
    row.median_us = Percentile(t, 0.5);
    row.p99_us = Percentile(t, 0.99);
    row.busbw_gbs = BusBwGbs(o, c, world, row.median_us);
    rows.push_back(row);
  }
  return rows;
}

// Like mpirun's default (--bind-to core for np <= 2, and when ranks fit the
// CPUs): rank r runs only on the r-th CPU this process may use. Unbound ranks
// can land on one core, where a spinning waiter delays the rank it waits for.
void BindToCpu(int rank, int ranks) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  if (ranks > CPU_COUNT(&allowed)) return;
  int seen = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (seen++ == rank) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      sched_setaffinity(0, sizeof(one), &one);
      return;
    }
  }
}

// Forks o.ranks children around one shm group; rank 0 writes its rows (and
// the floor) as JSON into a shared page, or "!error" on failure.
StatusOr<std::vector<CommBenchRow>> RunShm(const CommBenchOptions& o) {
  ShmOptions so = ShmOptionsFromEnv();
  so.buffer_bytes = o.buffer_bytes;
  if (o.algo != AllreduceAlgo::kMpi) so.algo = o.algo;
  ASSIGN_OR_RETURN(std::unique_ptr<ShmGroup> group, CreateShmGroup(o.ranks, so));
  char* shared = static_cast<char*>(
      mmap(nullptr, kSharedBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) return ErrnoError("comm-bench: mmap of the result page", errno);
  std::memset(shared, 0, 64);
  std::vector<pid_t> pids;
  for (int r = 0; r < o.ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      for (pid_t p : pids) kill(p, SIGKILL);
      return ErrnoError("comm-bench: fork of rank " + std::to_string(r), errno);
    }
    if (pid == 0) {
      SetLogRank(r);
      BindToCpu(r, o.ranks);
      auto comm = JoinShmGroup(*group, r, so);
      StatusOr<std::vector<CommBenchRow>> rows =
          comm.ok() ? MeasureRows(**comm, "shm", o) : StatusOr<std::vector<CommBenchRow>>(comm.status());
      if (r == 0) {
        std::string text;
        if (rows.ok()) {
          auto floor = MeasureFloor(o, o.ranks);
          rows->insert(rows->end(), floor.begin(), floor.end());
          text = CommBenchRowsToJson(*rows);
        } else {
          text = "!" + rows.status().ToString();
        }
        std::memcpy(shared, text.data(), std::min(text.size(), kSharedBytes - 1));
      } else if (!rows.ok()) {
        LogStatus(rows.status());
      }
      if (comm.ok()) comm->reset();  // leave the group before _exit
      _exit(rows.ok() ? 0 : 1);
    }
    pids.push_back(pid);
  }
  Status failed;
  for (int r = 0; r < o.ranks; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (failed.ok() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      failed = UnavailableError("comm-bench: shm rank " + std::to_string(r) + " failed (" +
                                (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                                   : "signal " + std::to_string(WTERMSIG(status))) +
                                ")");
    }
  }
  std::string text(shared, strnlen(shared, kSharedBytes));
  munmap(shared, kSharedBytes);
  if (!text.empty() && text[0] == '!') return UnavailableError("comm-bench shm: " + text.substr(1));
  if (!failed.ok()) return failed;
  return CommBenchRowsFromJson(text);
}

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string SizesArg(const std::vector<size_t>& sizes) {
  std::string s;
  for (size_t b : sizes) s += (s.empty() ? "" : ",") + std::to_string(b);
  return s;
}

// Re-runs this binary under mpirun and parses rank 0's JSON.
StatusOr<std::vector<CommBenchRow>> RunMpi(const CommBenchOptions& o) {
  std::string self = o.self_exe;
  if (self.empty()) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) return ErrnoError("comm-bench: readlink /proc/self/exe", errno);
    self.assign(buf, n);
  }
  std::string cmd = "mpirun -np " + std::to_string(o.ranks) + " --oversubscribe";
  if (geteuid() == 0) cmd += " --allow-run-as-root";
  for (const std::string& kv : o.mca) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError("--mca '" + kv + "': expected key=value");
    }
    cmd += " --mca " + ShellQuote(kv.substr(0, eq)) + " " + ShellQuote(kv.substr(eq + 1));
  }
  const AllreduceAlgo algo = o.algo == AllreduceAlgo::kAuto ? AllreduceAlgo::kMpi : o.algo;
  cmd += " " + ShellQuote(self) + " comm-bench --backend mpi --json --ranks " +
         std::to_string(o.ranks) + " --op " + o.op + " --dtype " + CommDTypeName(o.dtype) +
         " --algo " + AllreduceAlgoName(algo) + " --iters " + std::to_string(o.iters) +
         " --warmup " + std::to_string(o.warmup) + " --hidden " + std::to_string(o.hidden);
  if (o.workload.empty()) cmd += " --sizes " + SizesArg(o.sizes);
  else cmd += " --workload " + o.workload;
  LOG_DEBUG("comm-bench", "running: {}", cmd);
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return ErrnoError("comm-bench: popen mpirun", errno);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    return UnavailableError("comm-bench: `" + cmd + "` failed (status " + std::to_string(status) +
                            "); its stdout: " + out.substr(0, 2000))
        .WithHint("is Open MPI installed (mpirun in PATH)?");
  }
  const size_t start = out.find('[');
  if (start == std::string::npos) {
    return CorruptionError("comm-bench: mpirun printed no JSON rows: " + out.substr(0, 2000));
  }
  return CommBenchRowsFromJson(out.substr(start));
}

}  // namespace

StatusOr<size_t> ParseByteSize(const std::string& s) {
  if (s.empty()) return InvalidArgumentError("size '': expected a number like 64K");
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0 || i > 15) return InvalidArgumentError("size '" + s + "': expected a number like 64K");
  size_t v = std::stoull(s.substr(0, i));
  std::string suf = s.substr(i);
  size_t mul = 1;
  if (suf == "" || suf == "B") mul = 1;
  else if (suf == "K" || suf == "k" || suf == "KB" || suf == "KiB") mul = 1u << 10;
  else if (suf == "M" || suf == "MB" || suf == "MiB") mul = 1u << 20;
  else if (suf == "G" || suf == "GB" || suf == "GiB") mul = 1u << 30;
  else return InvalidArgumentError("size '" + s + "': unknown suffix '" + suf + "' (K, M, G)");
  if (v == 0) return InvalidArgumentError("size '" + s + "': must be > 0");
  return v * mul;
}

StatusOr<std::vector<size_t>> ParseSizeList(const std::string& s) {
  std::vector<size_t> out;
  if (const size_t colon = s.find(':'); colon != std::string::npos) {
    ASSIGN_OR_RETURN(size_t lo, ParseByteSize(s.substr(0, colon)));
    ASSIGN_OR_RETURN(size_t hi, ParseByteSize(s.substr(colon + 1)));
    if (lo > hi) return InvalidArgumentError("sizes '" + s + "': start is larger than end");
    for (size_t v = lo; v <= hi; v *= 2) out.push_back(v);
    return out;
  }
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    ASSIGN_OR_RETURN(size_t v, ParseByteSize(s.substr(pos, comma - pos)));
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

std::string CommBenchRowsToJson(const std::vector<CommBenchRow>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rows) {
    a.push_back({{"backend", r.backend}, {"op", r.op}, {"dtype", r.dtype}, {"bytes", r.bytes},
                 {"algo", r.algo}, {"median_us", r.median_us}, {"p99_us", r.p99_us},
                 {"busbw_gbs", r.busbw_gbs}});
  }
  return a.dump();
}

StatusOr<std::vector<CommBenchRow>> CommBenchRowsFromJson(const std::string& text) {
  nlohmann::json a = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (a.is_discarded() || !a.is_array()) {
    return CorruptionError("comm-bench rows: not a JSON array: " + text.substr(0, 200));
  }
  std::vector<CommBenchRow> rows;
  for (const auto& e : a) {
    if (!e.is_object() || !e.contains("bytes") || !e.contains("median_us")) {
      return CorruptionError("comm-bench rows: malformed row " + e.dump());
    }
    CommBenchRow r;
    r.backend = e.value("backend", "");
    r.op = e.value("op", "");
    r.dtype = e.value("dtype", "");
    r.bytes = e.value("bytes", size_t{0});
    r.algo = e.value("algo", "");
    r.median_us = e.value("median_us", 0.0);
    r.p99_us = e.value("p99_us", 0.0);
    r.busbw_gbs = e.value("busbw_gbs", 0.0);
    rows.push_back(r);
  }
  return rows;
}

StatusOr<std::vector<CommBenchRow>> RunCommBenchUnderMpirun(const CommBenchOptions& o) {
  MpiOptions mo = MpiOptionsFromEnv();
  mo.algo = o.algo == AllreduceAlgo::kAuto ? AllreduceAlgo::kMpi : o.algo;
  mo.shm.buffer_bytes = o.buffer_bytes;
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, NewMpiCommunicator(mo));
  return MeasureRows(*comm, comm->backend_name(), o);
}

StatusOr<std::vector<CommBenchRow>> RunCommBench(const CommBenchOptions& o) {
  if (o.ranks < 1 || o.ranks > 64) {
    return InvalidArgumentError("--ranks " + std::to_string(o.ranks) + ": expected 1..64");
  }
  if (o.op != "allreduce" && o.op != "fused-rmsnorm" && o.op != "allgather") {
    return InvalidArgumentError("--op '" + o.op + "': expected allreduce, fused-rmsnorm or allgather");
  }
  if (!o.workload.empty() && o.workload != "verify") {
    return InvalidArgumentError("--workload '" + o.workload + "': expected verify");
  }
  if (o.iters < 1 || o.warmup < 0 || o.hidden < 1) {
    return InvalidArgumentError("--iters must be >= 1, --warmup >= 0, --hidden >= 1");
  }
  if (o.workload.empty() && o.sizes.empty()) return InvalidArgumentError("--sizes is empty");
  std::vector<CommBenchRow> all;
  for (const std::string& b : o.backends) {
    StatusOr<std::vector<CommBenchRow>> rows =
        b == "shm" ? RunShm(o)
        : b == "mpi" ? RunMpi(o)
                     : StatusOr<std::vector<CommBenchRow>>(
                           InvalidArgumentError("--backend '" + b + "': expected shm or mpi"));
    if (!rows.ok()) return rows.status();
    all.insert(all.end(), rows->begin(), rows->end());
  }
  return all;
}

std::string FormatCommBench(const CommBenchOptions& o, const std::vector<CommBenchRow>& rows) {
  std::string s;
  char line[256];
  std::snprintf(line, sizeof(line), "# comm-bench: %s, %d ranks, %d iters (%d warmup); latency = max over ranks per iteration\n",
                o.workload == "verify" ? "verify workload (123 bf16 allreduces of T x hidden per step)"
                                       : (o.op + " " + CommDTypeName(OpDType(o))).c_str(),
                o.ranks, o.iters, o.warmup);
  s += line;
  std::snprintf(line, sizeof(line), "%-8s %12s  %-14s %12s %12s %12s %12s\n", "backend", "bytes",
                "algo", "median_us", "p99_us", "busbw_GB/s", "floor_us");
  s += line;
  auto floor_of = [&](size_t bytes) -> double {
    for (const auto& r : rows) {
      if (r.backend == "floor" && r.bytes == bytes) return r.median_us;
    }
    return -1;
  };
  for (const auto& r : rows) {
    if (r.backend == "floor") continue;
    const double f = floor_of(r.bytes);
    char fl[32] = "-";
    if (f >= 0) std::snprintf(fl, sizeof(fl), "%.2f", f);
    std::snprintf(line, sizeof(line), "%-8s %12zu  %-14s %12.2f %12.2f %12.2f %12s\n",
                  r.backend.c_str(), r.bytes, r.algo.c_str(), r.median_us, r.p99_us, r.busbw_gbs,
                  fl);
    s += line;
  }
  if (o.workload == "verify") {
    for (const auto& r : rows) {
      if (r.backend == "floor") continue;
      std::snprintf(line, sizeof(line), "verify step T=%zu: %s %.1f us per step (%d allreduces of %zu bytes)\n",
                    r.bytes / 2 / o.hidden, r.backend.c_str(), r.median_us,
                    kVerifyAllreducesPerStep, r.bytes);
      s += line;
    }
    for (const auto& a : rows) {
      if (a.backend != "shm") continue;
      for (const auto& b : rows) {
        if (b.backend == "mpi" && b.bytes == a.bytes && a.median_us > 0) {
          std::snprintf(line, sizeof(line), "verify step T=%zu: mpi/shm = %.2fx\n",
                        a.bytes / 2 / o.hidden, b.median_us / a.median_us);
          s += line;
        }
      }
    }
  }
  return s;
}

}  // namespace specd
