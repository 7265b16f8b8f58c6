// The vision towers' C++ side for posenc (python/posenc/__init__.py): their 2-D RoPE
// (vision_rope.h) and their learned position grids resized to an image (position_grid.h), so
// Python takes both from the core, the numbers `posenc spec` and `golden` give.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "owned_array.h"
#include "posenc/error.h"
#include "posenc/position_grid.h"
#include "posenc/vision_rope.h"

namespace py = pybind11;

namespace posenc {
namespace {

VisionRope tower_rope(const std::string& family, int head_dim, double theta, int patches_per_side, int merge_size) {
  VisionRopeParams p;
  p.family = from_name<VisionRopeFamily>(family);
  p.head_dim = head_dim;
  p.theta = theta;
  p.patches_per_side = patches_per_side;
  p.merge_size = merge_size;
  return vision_rope(p);
}

}  // namespace

void add_vision_module(py::module_& m) {
  // A vision tower's 2-D RoPE: frequencies, the axis each reads (0 row, 1 column), the pairing
  // and the summary line, validated by the core.
  m.def("vision_rope", [](const std::string& family, int head_dim, double theta, int patches_per_side, int merge_size) {
    const VisionRope v = tower_rope(family, head_dim, theta, patches_per_side, merge_size);
    return py::make_tuple(v.inv_freq, std::vector<int>(v.axis_of_freq.begin(), v.axis_of_freq.end()),
                          pairing_name(v.layout), vision_rope_summary(v), v.blocks);
  });
  // Its coordinates [2 * tokens] (rows, then columns) of one image of rows x cols patches.
  m.def("vision_rope_position_ids", [](const std::string& family, int head_dim, double theta, int patches_per_side,
                                       int merge_size, int rows, int cols) {
    return owned_array(vision_rope_position_ids(tower_rope(family, head_dim, theta, patches_per_side, merge_size), rows, cols));
  });
  // Idefics3's table rows along one axis (position_grid.h bucket_rows); dtype f32, bf16 or f16.
  m.def("bucket_rows", [](int table, int patches, const std::string& dtype) {
    return bucket_rows(table, patches, from_name<DType>(dtype));
  });
  // A learned grid [rows, cols, dim] (float32, C order) resized as F.interpolate(align_corners=False).
  m.def("resize_position_grid", [](py::array_t<float, py::array::c_style | py::array::forcecast> table, int rows, int cols,
                                   const std::string& mode) {
    if (table.ndim() != 3)
      throw Error("resize_position_grid: the table must be [rows, cols, dim], got " + std::to_string(table.ndim()) + " dimensions");
    for (int axis = 0; axis < 3; ++axis)  // checked before the copy, naming the size as given
      if (table.shape(axis) < 1 || table.shape(axis) > (axis < 2 ? 65536 : (1 << 20)))
        throw Error("resize_position_grid: the table's dimension " + std::to_string(axis) + " is " +
                    std::to_string(table.shape(axis)) + "; rows and cols must be in [1, 65536], dim in [1, 2^20]");
    PositionGrid g;
    g.rows = static_cast<int>(table.shape(0));
    g.cols = static_cast<int>(table.shape(1));
    g.dim = static_cast<int>(table.shape(2));
    g.values.assign(table.data(), table.data() + table.size());
    return owned_array(resize_position_grid(g, rows, cols, from_name<GridResize>(mode)).values);
  });
}

}  // namespace posenc
