/// @file test_guard.cpp
/// @brief Guard bands on host buffers (the same code as DeviceBuffer's): a write one past either
/// end is found with its byte, each buffer's bands differ, an empty buffer still has them.
#include <catch2/catch.hpp>

#include <cstring>

#include "gpulab/guard.hpp"

using gpulab::HostBuffer;

TEST_CASE("a write one past the end or one before the start breaks a guard band", "[cpu]") {
  HostBuffer<float> b(std::vector<float>{1.0f, 2.0f, 3.0f});
  CHECK(b.check_guards().intact);
  CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % 256 == 0);  // aligned like cudaMalloc
  b.data()[3] = 3.0f;  // i <= n
  const gpulab::GuardReport past = b.check_guards();
  CHECK_FALSE(past.intact);
  CHECK_FALSE(past.front);
  CHECK(past.byte_offset < sizeof(float));
  CHECK(past.describe("c").find("c: out-of-bounds write past the end") == 0);
  HostBuffer<float> c(4);
  c.data()[-1] = 0.0f;
  CHECK(c.check_guards().front);
  CHECK(c.values() == std::vector<float>(4, 0.0f));
}

TEST_CASE("each buffer's guard bands are its own so a copied band is noticed", "[cpu]") {
  HostBuffer<float> a(16), b(16);
  // Copy a's whole allocation layout (bands and data) over b's: b's bands now hold a's pattern.
  std::memcpy(reinterpret_cast<unsigned char*>(b.data()) - gpulab::guard::kFrontBytes,
              reinterpret_cast<unsigned char*>(a.data()) - gpulab::guard::kFrontBytes,
              gpulab::guard::kFrontBytes + 16 * sizeof(float) + gpulab::guard::kBackBytes);
  CHECK(a.check_guards().intact);
  CHECK_FALSE(b.check_guards().intact);
}

TEST_CASE("an empty buffer has guard bands and a valid pointer and moves leave the source empty", "[cpu]") {
  HostBuffer<int> empty(0);
  REQUIRE(empty.data() != nullptr);
  CHECK(empty.check_guards().intact);
  empty.data()[0] = 7;  // n = 0 must write nothing
  CHECK_FALSE(empty.check_guards().intact);
  HostBuffer<int> from(std::vector<int>{5, 6});
  HostBuffer<int> to(std::move(from));
  CHECK(to.values() == std::vector<int>{5, 6});
  CHECK(from.size() == 0);
  CHECK(to.check_guards().intact);
}
