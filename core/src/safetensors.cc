#include "posenc/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "posenc/error.h"

namespace posenc {
namespace {

using nlohmann::json;

static_assert(sizeof(float) == 4, "float32 expected");

std::uint64_t element_count(const std::vector<std::int64_t>& shape, const std::string& name) {
  std::uint64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0 || (d > 0 && n > (std::uint64_t{1} << 40) / static_cast<std::uint64_t>(d)))
      throw Error("safetensors: tensor '" + name + "' has an invalid shape dimension " + std::to_string(d));
    n *= static_cast<std::uint64_t>(d);
  }
  return n;
}

bool little_endian() {
  const std::uint32_t one = 1;
  unsigned char b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

}  // namespace

std::string safetensors_bytes(const SafeTensors& file) {
  if (!little_endian()) throw Error("safetensors: writing needs a little-endian machine");
  json header = json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  std::uint64_t offset = 0;
  std::set<std::string> names;
  for (const F32Tensor& t : file.tensors) {
    if (t.name == "__metadata__" || !names.insert(t.name).second)
      throw Error("safetensors: tensor name '" + t.name + "' is reserved or used twice");
    if (element_count(t.shape, t.name) != t.data.size())
      throw Error("safetensors: tensor '" + t.name + "' has " + std::to_string(t.data.size()) +
                  " values but its shape holds " + std::to_string(element_count(t.shape, t.name)));
    const std::uint64_t bytes = t.data.size() * 4;
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  out += text;
  for (const F32Tensor& t : file.tensors)
    out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * 4);
  return out;
}

SafeTensors parse_safetensors(const std::string& bytes) {
  if (!little_endian()) throw Error("safetensors: reading needs a little-endian machine");
  if (bytes.size() < 8) throw Error("safetensors: file of " + std::to_string(bytes.size()) + " bytes has no header size");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > bytes.size() - 8)
    throw Error("safetensors: header size " + std::to_string(n) + " exceeds the file (" + std::to_string(bytes.size()) +
                " bytes)");
  json header;
  try {
    header = json::parse(bytes.substr(8, n));
  } catch (const json::exception& e) {
    throw Error(std::string("safetensors: header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) throw Error("safetensors: header must be a JSON object");
  const std::uint64_t data_size = bytes.size() - 8 - n;
  const char* data = bytes.data() + 8 + n;
  SafeTensors out;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) throw Error("safetensors: __metadata__ must be an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) throw Error("safetensors: __metadata__." + m.key() + " must be a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    try {
      if (v.at("dtype") != "F32")
        throw Error("safetensors: tensor '" + name + "' has dtype " + v.at("dtype").dump() + "; only F32 is read");
      F32Tensor t;
      t.name = name;
      t.shape = v.at("shape").get<std::vector<std::int64_t>>();
      const auto offsets = v.at("data_offsets").get<std::vector<std::uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size)
        throw Error("safetensors: tensor '" + name + "' data_offsets " + v.at("data_offsets").dump() +
                    " are not within the " + std::to_string(data_size) + " data bytes");
      const std::uint64_t count = element_count(t.shape, name);
      if (offsets[1] - offsets[0] != count * 4)
        throw Error("safetensors: tensor '" + name + "' spans " + std::to_string(offsets[1] - offsets[0]) +
                    " bytes but its shape needs " + std::to_string(count * 4));
      t.data.resize(count);
      if (count) std::memcpy(t.data.data(), data + offsets[0], count * 4);
      ranges.push_back({offsets[0], offsets[1]});
      out.tensors.push_back(std::move(t));
    } catch (const json::exception& e) {
      throw Error("safetensors: tensor '" + name + "' entry is malformed: " + e.what());
    }
  }
  // File order, and no two tensors sharing bytes.
  std::vector<std::size_t> order(out.tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ranges[a] < ranges[b]; });
  SafeTensors sorted{{}, out.metadata};
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (k > 0 && ranges[order[k]].first < ranges[order[k - 1]].second)
      throw Error("safetensors: tensors '" + out.tensors[order[k - 1]].name + "' and '" + out.tensors[order[k]].name +
                  "' overlap");
    sorted.tensors.push_back(std::move(out.tensors[order[k]]));
  }
  return sorted;
}

}  // namespace posenc
