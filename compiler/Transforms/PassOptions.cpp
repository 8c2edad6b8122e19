//===- PassOptions.cpp - pass option types that print back exactly --------===//
#include "slapo/Transforms/PassOptions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace slapo {

std::string formatNumber(double value) {
  // Integral values print whole (100000, not 1e+05) up to where doubles
  // stop holding every integer.
  if (value == std::trunc(value) && std::fabs(value) < 0x1p53)
    return std::to_string(static_cast<int64_t>(value));
  char text[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  return text;
}

/// The bytes a name keeps in its printed form: none of them means anything
/// to MLIR's pipeline and option parsers.
static bool isPlainNameChar(char c) {
  return llvm::isAlnum(c) || llvm::is_contained("_.-*/", c);
}

void printModelName(llvm::raw_ostream &os, llvm::StringRef name) {
  if (!name.empty() && llvm::all_of(name, isPlainNameChar)) {
    os << name;
    return;
  }
  os << '"';
  for (char c : name) {
    if (isPlainNameChar(c))
      os << c;
    else
      os << '\\' << llvm::hexdigit((c >> 4) & 0xF) << llvm::hexdigit(c & 0xF);
  }
  os << '"';
}

} // namespace slapo

namespace llvm::cl {

bool parser<slapo::ModelName>::parse(Option &option, StringRef argName,
                                     StringRef text, slapo::ModelName &value) {
  if (!(text.size() >= 2 && text.front() == '"' && text.back() == '"')) {
    value = text.str();
    return false;
  }
  std::string name;
  for (StringRef rest = text.drop_front().drop_back(); !rest.empty();) {
    if (rest.front() != '\\') {
      name.push_back(rest.front());
      rest = rest.drop_front();
      continue;
    }
    unsigned byte;
    if (rest.size() < 3 || rest.substr(1, 2).getAsInteger(16, byte))
      return option.error("'" + text + "': a '\\' in a quoted name starts " +
                          "two hex digits");
    name.push_back(static_cast<char>(byte));
    rest = rest.drop_front(3);
  }
  value = std::move(name);
  return false;
}

bool parser<slapo::ExactDouble>::parse(Option &option, StringRef argName,
                                       StringRef text,
                                       slapo::ExactDouble &value) {
  double number;
  if (to_float(text, number)) {
    value = number;
    return false;
  }
  return option.error("'" + text + "' value invalid for floating point " +
                      "argument!");
}

} // namespace llvm::cl
