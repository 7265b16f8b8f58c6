#include "golden.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace posenc::testing {

std::string reference_dir() {
  if (const char* env = std::getenv("POSENC_REFERENCE_DIR"); env && *env) return env;
  return POSENC_REFERENCE_DIR;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read " + path +
                             " — the reference folder (tests/data in the checkout, or "
                             "$POSENC_REFERENCE_DIR) is required by the tests");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const nlohmann::json& golden() {
  static const nlohmann::json g = nlohmann::json::parse(read_file(reference_dir() + "/hf-golden.json"));
  return g;
}

const nlohmann::json& golden_case(const std::string& section, const std::string& name) {
  for (const auto& c : golden().at(section))
    if (c.value("name", "") == name) return c;
  throw std::runtime_error("golden case " + section + "/" + name + " not found");
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double denom = std::max(std::fabs(b[i]), 1e-30);
    worst = std::max(worst, std::fabs(a[i] - b[i]) / denom);
  }
  return worst;
}

}  // namespace posenc::testing

namespace posenc::testing {

std::vector<double> flatten(const nlohmann::json& nested) {
  std::vector<double> out;
  if (nested.is_array()) {
    for (const auto& e : nested) {
      auto inner = flatten(e);
      out.insert(out.end(), inner.begin(), inner.end());
    }
  } else {
    out.push_back(nested.get<double>());
  }
  return out;
}

std::vector<float> flatten_f(const nlohmann::json& nested) {
  const auto d = flatten(nested);
  return {d.begin(), d.end()};
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

std::string real_config(const std::string& name) { return reference_dir() + "/real-configs/" + name + ".json"; }
std::string extra_config(const std::string& name) { return reference_dir() + "/configs-extra/" + name + ".json"; }

}  // namespace posenc::testing
