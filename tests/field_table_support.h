// Tests over a field table (gemma.cpp's ForEach pattern: for_each_field(object, visit(row,
// member))): compare two objects field by field, and check that the table covers its struct.
// Any struct with a table works (RopeParams, ModelConfig, T5BucketParams); a member whose type
// has a table of its own is compared through it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace posenc::testing {

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

struct IgnoreField {
  template <class R, class M>
  void operator()(const R&, const M&) const {}
};

template <class S, class = void>
struct has_field_table : std::false_type {};
template <class S>
struct has_field_table<S, std::void_t<decltype(for_each_field(std::declval<const S&>(), IgnoreField{}))>>
    : std::true_type {};

// b's member at the offset where `member_of_a` sits in a: walks two objects of one type together.
template <class S, class M>
const M& same_member(const S& a, const S& b, const M& member_of_a) {
  const auto offset = reinterpret_cast<const char*>(&member_of_a) - reinterpret_cast<const char*>(&a);
  return *reinterpret_cast<const M*>(reinterpret_cast<const char*>(&b) + offset);
}

// EXPECT_EQ on every field of the table, each failure naming its row.
template <class S>
void expect_same_fields(const S& a, const S& b) {
  for_each_field(a, [&](const auto& row, const auto& member) {
    SCOPED_TRACE(row.name);
    using M = std::decay_t<decltype(member)>;
    if constexpr (has_field_table<M>::value) {
      expect_same_fields(member, same_member(a, b, member));
    } else {
      EXPECT_EQ(member, same_member(a, b, member));
    }
  });
}

// The table covers the struct: its members, ordered by offset, leave no gap wider than
// alignment asks and end where the struct ends. A member missing from the table leaves a gap
// (unless it fits in another member's padding, as a bool after a bool would).
template <class S>
void expect_table_covers(const S& s) {
  struct Span {
    std::size_t offset, size, align;
    bool operator<(const Span& o) const { return offset < o.offset; }
  };
  std::vector<Span> spans;
  for_each_field(s, [&](const auto&, const auto& member) {
    using M = std::decay_t<decltype(member)>;
    const auto offset = reinterpret_cast<const char*>(&member) - reinterpret_cast<const char*>(&s);
    spans.push_back({static_cast<std::size_t>(offset), sizeof(M), alignof(M)});
  });
  std::sort(spans.begin(), spans.end());
  auto align_up = [](std::size_t at, std::size_t align) { return (at + align - 1) / align * align; };
  std::size_t end = 0;
  for (const Span& m : spans) {
    EXPECT_EQ(m.offset, align_up(end, m.align)) << "a member between offsets " << end << " and " << m.offset << " has no row";
    end = m.offset + m.size;
  }
  EXPECT_EQ(align_up(end, alignof(S)), sizeof(S)) << "a member after offset " << end << " has no row";
}

}  // namespace posenc::testing
