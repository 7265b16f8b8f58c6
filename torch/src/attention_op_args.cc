#include "attention_op_args.h"

#include <cstdio>
#include <type_traits>

namespace posenc::torch_layer {
namespace {

// The schema's type and default of one field, from its C++ type and the struct's default value.
struct SchemaText {
  std::string text;
  void add(const char* name, const char* type, const std::string& value) {
    text += std::string(", ") + type + " " + name + "=" + value;
  }
  void operator()(const char* name, const c10::optional<at::Tensor>&) { add(name, "Tensor?", "None"); }
  void operator()(const char* name, std::int64_t v) { add(name, "int", std::to_string(v)); }
  void operator()(const char* name, bool v) { add(name, "bool", v ? "True" : "False"); }
  void operator()(const char* name, const std::string& v) { add(name, "str", "\"" + v + "\""); }
  void operator()(const char* name, const std::vector<std::int64_t>&) { add(name, "int[]", "[]"); }
  void operator()(const char* name, const std::vector<double>&) { add(name, "float[]", "[]"); }
  void operator()(const char* name, double v) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.17g", v);
    std::string s = buffer;
    if (s.find_first_of(".e") == std::string::npos) s += ".";  // the schema parser reads "1" as an int
    add(name, "float", s);
  }
};

// One field from its IValue, as the schema typed it (the dispatcher has checked the types).
struct ReadField {
  const c10::IValue* next;
  void operator()(const char*, c10::optional<at::Tensor>& v) {
    // None, or an undefined tensor from a C++ caller: absent.
    v = next->isNone() || !next->toTensor().defined() ? c10::nullopt : c10::optional<at::Tensor>(next->toTensor());
    ++next;
  }
  void operator()(const char*, std::int64_t& v) { v = (next++)->toInt(); }
  void operator()(const char*, double& v) { v = (next++)->toDouble(); }
  void operator()(const char*, bool& v) { v = (next++)->toBool(); }
  void operator()(const char*, std::string& v) { v = (next++)->toStringRef(); }
  void operator()(const char*, std::vector<std::int64_t>& v) { v = (next++)->toIntVector(); }
  void operator()(const char*, std::vector<double>& v) { v = (next++)->toDoubleVector(); }
};

std::size_t field_count() {
  AttentionOpArgs a;
  std::size_t n = 0;
  for_each_field(a, [&](const char*, const auto&) { ++n; });
  return n;
}

}  // namespace

std::string attention_schema() {
  SchemaText schema;
  const AttentionOpArgs defaults;
  for_each_field(defaults, schema);
  return "attention(Tensor q, Tensor k, Tensor v, *" + schema.text + ") -> (Tensor out, Tensor lse)";
}

void push_fields(const AttentionOpArgs& a, torch::jit::Stack& stack) {
  for_each_field(a, [&](const char*, const auto& v) { stack.emplace_back(v); });
}

AttentionOpArgs pop_fields(torch::jit::Stack& stack) {
  const std::size_t n = field_count();
  AttentionOpArgs a;
  ReadField read{stack.data() + (stack.size() - n)};
  for_each_field(a, read);
  torch::jit::drop(stack, n);
  return a;
}

}  // namespace posenc::torch_layer
