/// @file test_emu_transform.cpp
/// @brief The emulator's rewrite of CUDA source: launches of every shape, shared memory, and what
/// it must leave alone (comments, strings, template kernels' registration).
#include <catch2/catch.hpp>

#include <algorithm>

#include "author/emu_transform.hpp"

using gpulab::cli::emulator_source;

namespace {
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("launches become emulator calls whatever the kernel's name looks like", "[cpu]") {
  const std::string out = emulator_source(
      "void f(float* x, int n, cudaStream_t s) {\n"
      "  add_kernel<<<ceil_div(n, 256), 256, 0, s>>>(x, n);\n"
      "  lab04::mma_kernel<half, 4><<<dim3(2, 3), dim3(32, 4)>>>(x, std::max(n, (int)f(1)), [](int i) { return i; });\n"
      "  kernel  <<< grid , block >>> ( x );\n"
      "}\n",
      "a.cu");
  CHECK(out.rfind("#include \"emu.hpp\"\n#line 1 \"a.cu\"\n", 0) == 0);  // messages name the learner's lines
  CHECK(has(out, "emu::Launch(ceil_div(n, 256), 256, 0, s).of(add_kernel).run([&] { add_kernel(x, n); });"));
  CHECK(has(out, "emu::Launch(dim3(2, 3), dim3(32, 4)).of(lab04::mma_kernel<half, 4>).run([&] { lab04::mma_kernel<half, 4>(x, std::max(n, (int)f(1)), [](int i) { return i; }); });"));
  CHECK(has(out, ".of(kernel).run([&] { kernel( x ); });"));
  CHECK_FALSE(has(out, "<<<"));
}

TEST_CASE("a launch over several lines keeps the lines after it where they were", "[cpu]") {
  const std::string out = emulator_source("k<<<1,\n  2>>>(a,\n  b);\nint after;\n", "a.cu");
  CHECK(std::count(out.begin(), out.end(), '\n') == 2 + 4);  // the two header lines, then the original four
  CHECK(has(out, "emu::Launch(1,\n  2).of(k).run([&] { k(a,\n  b); });\nint after;"));
}

TEST_CASE("comments and strings are left as they are", "[cpu]") {
  const std::string src = "// k<<<1, 1>>>(x);\nconst char* s = \"k<<<1, 1>>>(x);\";\n/* k<<<2, 2>>>(y); */\n";
  CHECK(emulator_source(src, "a.cu") == "#include \"emu.hpp\"\n#line 1 \"a.cu\"\n" + src);
}

TEST_CASE("dynamic shared memory becomes a pointer and static shared memory is registered per kernel", "[cpu]") {
  const std::string out = emulator_source(
      "__global__ void __launch_bounds__(256) tile_kernel(const float* in) {\n"
      "  __shared__ float tile[32][33];\n"
      "  __shared__ __align__(16) unsigned int bins[256];\n"
      "  extern __shared__ float dyn[];\n"
      "}\n"
      "template <int N>\n__global__ void templ_kernel() {\n  __shared__ float t[N];\n}\n"
      "__global__ void no_shared_kernel() {}\n",
      "a.cu");
  CHECK(has(out, "float* dyn = emu::dynamic_shared<float>();"));
  CHECK(has(out, "static emu::SharedRegistration emu_shared_tile_kernel(reinterpret_cast<const void*>(&tile_kernel), "
                 "sizeof(float[32][33]) + sizeof(unsigned int[256]));"));
  CHECK_FALSE(has(out, "emu_shared_templ_kernel"));      // a template has no single address
  CHECK_FALSE(has(out, "emu_shared_no_shared_kernel"));  // nothing to register
}

TEST_CASE("a launch the rewrite cannot follow is an error with file and line", "[cpu]") {
  CHECK_THROWS_WITH(emulator_source("void f() {\n  k<<<1, 1>>>;\n}\n", "a.cu"), Catch::Contains("a.cu:2: a launch >>> not followed by its arguments"));
  CHECK_THROWS_WITH(emulator_source("void f() {\n\n  k<<<1, 1(x);\n}\n", "a.cu"), Catch::Contains("a.cu:3"));
}
