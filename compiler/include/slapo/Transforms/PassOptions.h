//===- PassOptions.h - pass option types that print back exactly -*- C++ -*-=//
//
// MLIR prints a pass option with `os << value`: doubles with 6 digits and
// strings as they are, so a printed pipeline loses bits of a learning rate
// and breaks at a module path with a space, a comma or a brace. The options
// of the slapo passes use these types instead, whose text (`slapoc
// --emit=schedule`, --mlir-print-ir-after-all, a pass pipeline) parses back
// to the same values:
//
//   slapo-shard{axis=1 modules=h.0.attn,"sub \22\E2\82\AC\22" param=weight}
//   slapo-optimizer{lr=0.0003 ...}
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_TRANSFORMS_PASSOPTIONS_H
#define SLAPO_TRANSFORMS_PASSOPTIONS_H

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace slapo {

/// A name from the model (a module path, a parameter's name): any bytes. It
/// is a std::string to the passes; as an option it prints as it is where it
/// is a plain name (letters, digits, `_ . - * /`) and otherwise in double
/// quotes with every other byte as `\XX` (hex), so that no space, comma,
/// brace or quote of a name reaches MLIR's pipeline parser.
struct ModelName : std::string {
  using std::string::string;
  ModelName(std::string name) : std::string(std::move(name)) {}
};
/// Options print through their parser, not as a plain string.
llvm::raw_ostream &operator<<(llvm::raw_ostream &os,
                              const ModelName &name) = delete;

/// A double option that prints with the fewest digits that read back as the
/// same double (0.0003, 0.1, 0.30000000000000004).
struct ExactDouble {
  ExactDouble(double value = 0) : value(value) {}
  operator double() const { return value; }
  double value;
};
/// Options print through their parser, with every digit needed.
llvm::raw_ostream &operator<<(llvm::raw_ostream &os,
                              const ExactDouble &value) = delete;

/// The shortest decimal text that reads back as `value` (3e-4 prints as
/// 0.0003, 1e-8 as 1e-08), integral values whole (100000, not 1e+05):
/// options, messages and the printed plan stay exact.
std::string formatNumber(double value);

/// `name` as ModelName options print it.
void printModelName(llvm::raw_ostream &os, llvm::StringRef name);

} // namespace slapo

namespace llvm::cl {

/// The parsers of slapo's option types: `print` prints what `parse` reads
/// back.
template <typename T> class ExactParser : public basic_parser<T> {
public:
  using basic_parser<T>::basic_parser;
  void printOptionDiff(const Option &option, const T &value,
                       const OptionValue<T> & /*defaultValue*/,
                       size_t globalWidth) const {
    this->printOptionName(option, globalWidth);
    outs() << "= ";
    parser<T>::print(outs(), value);
    outs() << "\n";
  }
};

/// Reads what printModelName prints (and a plain name as it is).
template <>
class parser<slapo::ModelName> : public ExactParser<slapo::ModelName> {
public:
  using ExactParser::ExactParser;
  bool parse(Option &option, StringRef argName, StringRef text,
             slapo::ModelName &value);
  StringRef getValueName() const override { return "name"; }
  static void print(raw_ostream &os, const slapo::ModelName &value) {
    slapo::printModelName(os, value);
  }
};

/// Reads a double as cl::parser<double> does.
template <>
class parser<slapo::ExactDouble> : public ExactParser<slapo::ExactDouble> {
public:
  using ExactParser::ExactParser;
  bool parse(Option &option, StringRef argName, StringRef text,
             slapo::ExactDouble &value);
  StringRef getValueName() const override { return "number"; }
  static void print(raw_ostream &os, const slapo::ExactDouble &value) {
    os << slapo::formatNumber(value);
  }
};

} // namespace llvm::cl

#endif // SLAPO_TRANSFORMS_PASSOPTIONS_H
