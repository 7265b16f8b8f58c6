// posenc.plot's C++ side (posenc/plot.py): the CLI's pictures (posenc_plot) written to files.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/rope_params_json.h"
#include "posenc_plot/figures.h"
#include "posenc_plot/heatmap.h"
#include "posenc_plot/user_table.h"

namespace py = pybind11;

namespace posenc {

void add_plots(py::module_& m) {
  m.def("plot_heatmap", [](const std::string& scheme, int dim, std::int64_t first, std::int64_t count, int heads, int head,
                           double base, const std::string& out) {
    const plot::HeatmapRequest d;  // figures.h's order; seed and t5 at their defaults
    return plot::write_heatmap_files(plot::heatmap_data({scheme, dim, first, count, heads, head, base, d.seed, d.t5}), out);
  });
  // decay: kerple's kind ("log" | "power") and, for scheme "table", a [heads, distances] table.
  m.def("plot_chart", [](const std::string& kind, const std::string& scheme_or_params, int dim, int heads,
                         std::int64_t max_distance, double base, const std::string& out, const std::string& kerple_kind,
                         std::optional<py::array_t<double, py::array::c_style | py::array::forcecast>> table) {
    std::string svg;
    if (kind == "decay") {
      plot::DecayRequest d;  // t5 buckets at their defaults
      d.scheme = scheme_or_params;
      d.dim = dim;
      d.heads = heads;
      d.max_distance = max_distance;
      d.base = base;
      d.kind = kerple_kind;
      if (table) {
        if (table->ndim() != 2) throw Error("table must be 2-D [heads, distances], got " + std::to_string(table->ndim()) + " dimensions");
        if (table->shape(0) > 4096 || table->shape(1) > (1 << 20))  // before the int casts; bias_chart checks the rest and every drawn value
          throw Error("table of " + std::to_string(table->shape(0)) + " x " + std::to_string(table->shape(1)) +
                      "; at most 4096 heads and 2^20 distances");
        plot::UserTable t{static_cast<int>(table->shape(0)), static_cast<int>(table->shape(1)),
                          std::vector<double>(table->data(), table->data() + table->size())};
        d.table = std::move(t);
        d.table_name = "table";
      }
      svg = plot::decay_svg(d);
    } else {  // wavelengths of RopeParams given as JSON
      svg = plot::wavelength_svg(plot::wavelength_data(rope_params_from_json(scheme_or_params, "params"), "wavelengths"));
    }
    if (out.size() < 4 || out.compare(out.size() - 4, 4, ".svg") != 0)
      throw Error("line charts are SVG: out must end in .svg, got '" + out + "'");
    plot::write_text(out, svg);
    return out;
  });
}

}  // namespace posenc
