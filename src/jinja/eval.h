// Renders a parsed chat template (see ast.h) over top-level variables.
//
// Scoping follows jinja2: a for loop opens a scope (a `set` in its body is
// not visible after the loop, which is why templates use namespace()), `if`
// does not; macros see the scope they were defined in. A for loop iterates
// a list, a string's characters, a dict's keys or an undefined value (no
// items); output written before a `break`/`continue` is kept, and the else
// block renders when no iteration ran to the end of the body (nothing to
// iterate, or every iteration ended in break/continue), as jinja2 does.
//
// Limits keep a hostile template from exhausting the server: at most
// kMaxSteps evaluations, kMaxOutput bytes of output and kMaxCallDepth nested
// macro calls; exceeding one is an error, not a crash.
#pragma once

#include <string>

#include "jinja/ast.h"

namespace specd::jinja {

inline constexpr int64_t kMaxSteps = 2'000'000;
inline constexpr size_t kMaxOutput = 64u << 20;
inline constexpr int kMaxCallDepth = 64;

// Throws JinjaError. Thread-safe for concurrent calls on the same program.
std::string RenderProgram(const Program& program, const Object& globals);

}  // namespace specd::jinja
