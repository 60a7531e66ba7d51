// Parser for the chat-template Jinja subset. Grammar and operator
// precedence follow jinja2 (a filter applies to a preceding unary minus,
// `-x|abs` is `(-x)|abs`; `is` tests bind tighter than `*`; `not` is above
// comparisons).
//
// ParseTemplate also validates the whole tree up front: every filter, test,
// method and called function must be one this renderer implements, so an
// unsupported template fails at load time naming the construct and its
// line/column rather than rendering a wrong prompt later.
#pragma once

#include <string_view>

#include "jinja/ast.h"

namespace specd::jinja {

// Throws JinjaError with the position of the offending token.
Program ParseTemplate(std::string_view source);

}  // namespace specd::jinja
