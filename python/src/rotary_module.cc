// The rotary variants' C++ side for posenc.nn (python/posenc/rotary_variants.py): xPos's scales
// and checks (rope_xpos.h) and axial RoPE's frequencies and grids (axial_rope.h), so the Python
// modules take both from the core, the same numbers the kernels use, rather than a second copy;
// and PoPE's double-precision definition (pope.h), which posenc.nn.PolarEmbedding is tested against.
// The rotations themselves run through module.cc's rope_rotate (its xpos_* keywords).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/axial_rope.h"
#include "posenc/error.h"
#include "posenc/pope.h"
#include "posenc/rope_xpos.h"

namespace py = pybind11;

namespace posenc {
namespace {

XPosParams xpos_params(double scale_base, double gamma, double center) {
  XPosParams p;
  p.scale_base = scale_base;
  p.gamma = gamma;
  p.center = center;
  return p;
}

AxialRopeParams axial_params(int axes, int axis_dim, const std::string& freqs_for, double theta, double max_freq) {
  AxialRopeParams p;
  p.axes = axes;
  p.axis_dim = axis_dim;
  p.freqs_for = from_name<AxialFrequencies>(freqs_for);
  p.theta = theta;
  p.max_freq = max_freq;
  validate(p);
  return p;
}

}  // namespace

void add_rotary_variants(py::module_& m) {
  // The core's checks of xPos parameters over positions [smallest, largest] (validate_xpos).
  m.def("validate_xpos", [](double scale_base, double gamma, double center, std::int64_t smallest, std::int64_t largest) {
    validate_xpos(xpos_params(scale_base, gamma, center), smallest, largest);
  });
  // One axis's frequencies [axis_dim / 2] (axial_axis_frequencies: lang = the default schedule's,
  // pixel = linspace(1, max_freq / 2) * pi), the parameters validated.
  m.def("axial_frequencies", [](int axes, int axis_dim, const std::string& freqs_for, double theta, double max_freq) {
    return axial_axis_frequencies(axial_params(axes, axis_dim, freqs_for, theta, max_freq));
  });
  // The axis each of the axes * axis_dim / 2 kernel frequencies reads (axial_kernel_frequencies:
  // lang, at most 3 axes; an Error naming what else is asked), and those frequencies.
  m.def("axial_kernel_frequencies", [](int axes, int axis_dim, double theta) {
    const AxialKernelFrequencies k = axial_kernel_frequencies(axial_params(axes, axis_dim, "lang", theta, 10.0));
    return py::make_tuple(k.inv_freq, std::vector<int>(k.axis_of_freq.begin(), k.axis_of_freq.end()));
  });
  // A grid's coordinates [prod(dims) * axes], row-major, as get_axial_freqs forms them.
  m.def("axial_grid", [](int axes, int axis_dim, const std::string& freqs_for, const std::vector<int>& dims) {
    return axial_grid_coordinates(axial_params(axes, axis_dim, freqs_for, 10000.0, 10.0), dims);
  });
  // PoPE's row of one head (pope_row): x [dim] at position -> [2 dim] (real parts, then imaginary),
  // a key's when delta [dim] is given (used clamped to [-2 pi, 0]); double.
  m.def(
      "pope_row",
      [](const std::vector<double>& x, std::int64_t position, double base, const std::optional<std::vector<double>>& delta) {
        const PopeParams p{static_cast<int>(std::min<std::size_t>(x.size(), 1u << 30)), base};
        if (delta && delta->size() != x.size())
          throw Error("pope_row: delta must have the row's " + std::to_string(x.size()) + " channels, got " + std::to_string(delta->size()));
        std::vector<double> out(2 * x.size());
        pope_row(p, x.data(), position, delta ? delta->data() : nullptr, out.data());
        return out;
      },
      py::arg("x"), py::arg("position"), py::arg("base") = 10000.0, py::arg("delta") = std::nullopt);
}

}  // namespace posenc
