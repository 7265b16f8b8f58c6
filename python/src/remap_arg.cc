#include "remap_arg.h"

#include <cstdint>
#include <string>

#include "posenc/error.h"
#include "posenc/names.h"

namespace py = pybind11;

namespace posenc {
namespace {

template <class T>
T get(const py::dict& d, const char* key) {
  if (!d.contains(key)) throw Error(std::string("remap: key '") + key + "' is missing");
  try {
    return d[key].cast<T>();
  } catch (const py::cast_error&) {
    throw Error(std::string("remap: key '") + key + "' cannot be read from " + std::string(py::repr(d[key])).substr(0, 80));
  }
}

}  // namespace

PositionRemap remap_of(const py::dict& d) {
  PositionRemap r;
  r.kind = from_name<PositionRemapKind>(get<std::string>(d, "remap"));
  r.window = get<std::int64_t>(d, "remap_window");
  r.group = get<std::int64_t>(d, "remap_group");
  r.leak = get<double>(d, "remap_leak");
  r.chunk_size = get<std::int64_t>(d, "remap_chunk_size");
  r.local_size = get<std::int64_t>(d, "remap_local_size");
  return r;
}

}  // namespace posenc
