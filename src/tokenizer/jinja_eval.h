// Renders a parsed chat template (see jinja_ast.h) over top-level variables.
//
// Scoping follows @huggingface/jinja: a for loop opens a scope (a `set` in
// its body is not visible after the loop, which is why templates use
// namespace()), `if` does not; macros see the scope they were defined in.
// A `break`/`continue` drops the output of the interrupted iteration, and a
// loop whose every iteration ended in break/continue renders its else
// block, as the reference does.
//
// Limits keep a hostile template from exhausting the server: at most
// kMaxSteps evaluations, kMaxOutput bytes of output and kMaxCallDepth nested
// macro calls; exceeding one is an error, not a crash.
#pragma once

#include <string>

#include "tokenizer/jinja_ast.h"

namespace specd::jinja {

inline constexpr int64_t kMaxSteps = 2'000'000;
inline constexpr size_t kMaxOutput = 64u << 20;
inline constexpr int kMaxCallDepth = 64;

// Throws JinjaError. Thread-safe for concurrent calls on the same program.
std::string RenderProgram(const Program& program, const Object& globals);

}  // namespace specd::jinja
