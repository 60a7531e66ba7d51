// specd bench's table and gnuplot chart, both from the --json object.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "app/bench_child.h"

namespace specd::app {
namespace {

using nlohmann::json;

std::string ConfigName(const json& c) {
  std::string t = c["config"].get<std::string>();
  return t.empty() ? "(default)" : t;
}

}  // namespace

std::string FormatBenchReport(const json& r) {
  const json& w = r["workload"];
  std::string s = fmt::format("specd bench: {}\n", r["model"].get<std::string>());
  s += fmt::format(
      "workload: {} prompt(s) x {} tokens, {} generated, {} round(s) interleaved (+{} warm-up); "
      "load average {:.2f} -> {:.2f}\n\n",
      w["prompts"].get<int>(), w["prompt_len"].get<int>(), w["max_tokens"].get<int>(),
      w["repeats"].get<int>(), w["warmup"].get<int>(), r["load_avg"]["start"].get<double>(),
      r["load_avg"]["end"].get<double>());
  const json& cs = r["configs"];
  const std::string base = cs[0]["label"].get<std::string>();
  s += fmt::format("| cfg | flags | decode tok/s median [min, max] | TTFT ms | prefill tok/s | "
                   "accept len | ratio vs {} [95% CI] |\n",
                   base);
  s += "|---|---|---|---|---|---|---|\n";
  for (const json& c : cs) {
    const json& d = c["decode_tok_s"];
    const json& ra = c["ratio"];
    std::string ratio = fmt::format("{:.3f}", ra["ratio"].get<double>());
    if (!ra["ci_low"].is_null())
      ratio += fmt::format(" [{:.3f}, {:.3f}]", ra["ci_low"].get<double>(),
                           ra["ci_high"].get<double>());
    std::string accept = c["accept_length_mean"].is_null()
                             ? "-"
                             : fmt::format("{:.2f}", c["accept_length_mean"].get<double>());
    s += fmt::format("| {} | {} | {:.2f} [{:.2f}, {:.2f}] | {:.1f} | {:.1f} | {} | {} |\n",
                     c["label"].get<std::string>(), ConfigName(c), d["median"].get<double>(),
                     d["min"].get<double>(), d["max"].get<double>(),
                     c["ttft_ms"]["median"].get<double>(),
                     c["prefill_tok_s"]["median"].get<double>(), accept, ratio);
  }
  s += fmt::format("\nratio: {}\n", r["ratio_method"].get<std::string>());

  for (const json& c : cs) {
    if (!c.contains("profile") || c["profile"].is_null()) continue;
    const json& p = c["profile"];
    const double steps = p["steps"].get<double>();
    const double step_ms = p["step_ms_total"].get<double>();
    s += fmt::format("\ndecode profile, {} \"{}\": {:.3f} ms per step over {} steps\n",
                     c["label"].get<std::string>(), c["config"].get<std::string>(),
                     step_ms / steps, static_cast<int64_t>(steps));
    s += "| op | ms/step | % of step | calls/step |\n|---|---|---|---|\n";
    std::vector<std::pair<double, std::string>> rows;
    double accounted = 0;
    for (const auto& [name, v] : p["ops"].items()) {
      const double ms = v["ms"].get<double>();
      accounted += ms;
      rows.push_back({ms, fmt::format("| {} | {:.3f} | {:.1f}% | {:.1f} |\n", name, ms / steps,
                                      100 * ms / step_ms, v["calls"].get<double>() / steps)});
    }
    std::sort(rows.rbegin(), rows.rend());
    for (const auto& row : rows) s += row.second;
    s += fmt::format("| other | {:.3f} | {:.1f}% | |\n", (step_ms - accounted) / steps,
                     100 * (step_ms - accounted) / step_ms);
  }

  bool any_cost = false;
  for (const json& c : cs) any_cost |= c.contains("forward_cost") && !c["forward_cost"].empty();
  if (any_cost) {
    s += "\nforward over n tokens after the prompt (all logits, as verification), median ms "
         "(x the first n):\n";
    for (const json& c : cs) {
      if (!c.contains("forward_cost") || c["forward_cost"].empty()) continue;
      const json& fc = c["forward_cost"];
      const double first = fc[0]["ms"].get<double>();
      s += fmt::format("  {} \"{}\":", c["label"].get<std::string>(), c["config"].get<std::string>());
      for (const json& e : fc)
        s += fmt::format("  n={} {:.2f} ms ({:.2f}x)", e["n"].get<int>(), e["ms"].get<double>(),
                         e["ms"].get<double>() / first);
      s += "\n";
    }
  }
  return s;
}

Status PlotBench(const json& r, const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext != ".svg" && ext != ".png")
    return InvalidArgumentError("--plot: " + path + ": expected a .svg or .png file name");
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    std::fprintf(stderr, "specd bench: gnuplot not found, no plot drawn (apt-get install "
                         "gnuplot-nox)\n");
    return Status::Ok();
  }
  const std::string dir = std::filesystem::temp_directory_path() /
                          fmt::format("specd-plot-{}", static_cast<int>(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string data = dir + "/data.txt", script = dir + "/plot.gp";
  {
    std::ofstream d(data);
    for (const json& c : r["configs"]) {
      std::string name = c["label"].get<std::string>() + ": " + ConfigName(c);
      std::replace(name.begin(), name.end(), '"', '\'');
      const json& t = c["decode_tok_s"];
      d << '"' << name << "\" " << t["median"].get<double>() << ' ' << t["min"].get<double>()
        << ' ' << t["max"].get<double>() << '\n';
    }
  }
  {
    std::ofstream g(script);
    g << (ext == ".svg" ? "set terminal svg size 900,500 dynamic\n"
                        : "set terminal png size 900,500\n");
    g << "set output '" << path << "'\n"
      << "set title 'specd bench: decode tok/s (median, error bars min-max)' noenhanced\n"
      << "set ylabel 'decode tok/s'\nset yrange [0:*]\nset grid ytics\n"
      << "set style data histogram\nset style histogram errorbars gap 1 lw 1\n"
      << "set style fill solid 0.5 border -1\nset boxwidth 0.8\n"
      << "set xtics rotate by -20 noenhanced\nunset key\n"
      << "plot '" << data << "' using 2:3:4:xtic(1)\n";
  }
  int rc = std::system(fmt::format("gnuplot '{}' 2>&1", script).c_str());
  std::filesystem::remove_all(dir);
  if (rc != 0) return InternalError(fmt::format("gnuplot failed (status {}) drawing {}", rc, path));
  std::fprintf(stderr, "specd bench: plot written to %s\n", path.c_str());
  return Status::Ok();
}

}  // namespace specd::app
