// The engine kit from Python: posenc.spec(), posenc.golden() and posenc.gguf() (posenc/engine.py)
// over the same core functions as the CLI's `spec --json`, `golden` and `gguf --json`, so the
// structures are the CLI's own (engine_json.h). A config crosses as a path or as JSON text.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "posenc/engine_json.h"
#include "posenc/golden.h"
#include "remap_arg.h"
#include "posenc/gguf.h"
#include "posenc/hf_config.h"
#include "posenc/model_spec.h"

namespace py = pybind11;

namespace posenc {
namespace {

// A config named by path (is_path) or given as its JSON text, read with the CLI's options.
struct ConfigSource {
  std::string source;
  bool is_path = true;
  ConfigOptions options;

  ModelSpec spec() const { return is_path ? load_model_spec(source, options) : parse_model_spec(source, options); }
  ModelRope rope() const { return is_path ? load_hf_config(source, options) : parse_hf_config(source, options); }
};

ConfigSource source_of(const std::string& source, bool is_path, bool lenient, bool hf_compatible) {
  return ConfigSource{source, is_path, ConfigOptions{lenient, hf_compatible}};
}

// (manifest JSON, [(name, shape, float32 bytes)]): bytes, not Python lists, so a golden's [P, P]
// logits cost their own size (torch.frombuffer on the Python side).
using GoldenTensors = std::vector<std::tuple<std::string, std::vector<std::int64_t>, py::bytes>>;

std::tuple<std::string, GoldenTensors> golden(const ConfigSource& c, const GoldenParams& params, const std::string& out_dir) {
  const Golden g = make_golden(c.spec(), params);
  if (!out_dir.empty()) write_golden(g, out_dir);  // atomic: both files or neither
  GoldenTensors tensors;
  for (const F32Tensor& t : g.tensors.tensors)
    tensors.emplace_back(t.name, t.shape,
                         py::bytes(reinterpret_cast<const char*>(t.data.data()), t.data.size() * sizeof(float)));
  return {g.manifest_json, std::move(tensors)};
}

}  // namespace

void add_engine_kit(py::module_& m) {
  m.def("spec_json", [](const std::string& source, bool is_path, bool lenient, bool hf_compatible) {
    return model_spec_json(source_of(source, is_path, lenient, hf_compatible).spec());
  });
  m.def("golden", [](const std::string& source, bool is_path, bool lenient, bool hf_compatible,
                     const std::vector<std::int64_t>& positions, std::uint64_t seed, const std::string& out_dir,
                     std::optional<std::int64_t> shift, std::optional<py::dict> remap) {
    GoldenParams params;
    params.positions = positions;
    params.seed = seed;
    params.shift = shift;
    if (remap) params.remap = remap_of(*remap);
    return golden(source_of(source, is_path, lenient, hf_compatible), params, out_dir);
  });
  // config "": no comparison (the report has no agrees_with_hf).
  m.def("gguf_json", [](const std::string& path, const std::string& config, bool is_path, bool lenient,
                        bool hf_compatible) {
    const GgufFile f = read_gguf(path);
    const GgufRope r = gguf_rope(f);
    if (config.empty()) return gguf_report_json(GgufReport{&f, &r, nullptr});
    const std::vector<GgufMismatch> mismatches =
        compare_with_hf(r, source_of(config, is_path, lenient, hf_compatible).rope());
    return gguf_report_json(GgufReport{&f, &r, &mismatches});
  });
}

}  // namespace posenc
