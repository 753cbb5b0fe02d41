/// @file test_integrity.cpp
/// @brief The grader's integrity rules on recorded inputs: which symbols a learner's objects may
/// define and call (nm lines as nvcc and g++ emit them), the reference profile and derived time
/// limits, the baseline agreement of a performance check, and the tree guard's repair.
#include <catch2/catch.hpp>

#include "grade/grade_stages.hpp"
#include "grade/integrity.hpp"
#include "grade/symbols.hpp"
#include "temp_tree.hpp"

using namespace gpulab::cli;

namespace {
SymbolContext lab01_rules() {
  SymbolContext c;
  c.lab_number = "01";
  c.grader_strong = {"gpulab::compare_within(std::vector<float, std::allocator<float> > const&, std::vector<double, std::allocator<double> > const&, std::vector<double, std::allocator<double> > const&)",
                     "main"};
  c.reference_weak = {"DW.ref.__gxx_personality_v0", "cudaError cudaLaunchKernel<char>(char const*, dim3, dim3, void**, unsigned long, CUstream_st*)"};
  c.reference_calls = {"atexit"};
  return c;
}
std::string problem(const std::string& nm_line) {
  const auto s = parse_nm(nm_line);
  REQUIRE(s.size() == 1);
  return symbol_problem(s[0], lab01_rules());
}
}  // namespace

TEST_CASE("the learner's objects may define only the lab's symbols and what is emitted for them", "[cpu]") {
  // Recorded from nvcc 13 and g++ 12 objects of lab 01.
  CHECK(problem("0000000000001070 T lab01::vector_add(float const*, float const*, float*, long, CUstream_st*)").empty());
  CHECK(problem("00000000000005f0 T __device_stub__ZN5lab0117vector_add_kernelEPKfS1_Pfl(float const*, float const*, float*, long)").empty());
  CHECK(problem("0000000000000000 V DW.ref.__gxx_personality_v0").empty());
  CHECK(problem("0000000000000000 W cudaError cudaLaunchKernel<char>(char const*, dim3, dim3, void**, unsigned long, CUstream_st*)").empty());
  CHECK(problem("0000000000000000 W lab01::helper<float>(float)::{lambda(int)#1}::operator()(int) const").empty());
  CHECK(problem("0000000000000000 W int lab01::sum<int>(int const*, int)").empty());  // a template with its return type
  CHECK(problem("0000000000000000 V typeinfo for lab01::Launch1D").empty());
  CHECK(problem("0000000000000000 W void std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(int const&)").empty());
  CHECK(problem("0000000000000000 W gpulab::DeviceBuffer<int>::~DeviceBuffer()").empty());  // header code
  CHECK(problem("0000000000000010 t helper_with_internal_linkage()").empty());
  CHECK(problem("                 U cudaMalloc").empty());
  CHECK(problem("                 U atexit").empty());  // the reference's objects call it too (nvcc)
}

TEST_CASE("a definition outside the lab or one that replaces the grader's or the runtime's fails", "[cpu]") {
  CHECK(problem("0000000000000000 T helper()").find("defines helper() outside lab01::") == 0);
  CHECK(problem("0000000000000000 W gpulab::compare_within(std::vector<float, std::allocator<float> > const&, std::vector<double, std::allocator<double> > const&, std::vector<double, std::allocator<double> > const&)")
            .find("which belongs to the grader") != std::string::npos);
  CHECK(problem("0000000000000000 T main").find("which belongs to the grader") != std::string::npos);
  CHECK(problem("0000000000000000 W PMPI_Allreduce").find("belongs to the runtime or the test runner") != std::string::npos);
  CHECK(problem("0000000000000000 W Catch::Session::run()").find("belongs to the runtime") != std::string::npos);
  CHECK(problem("0000000000000000 W cuInit").find("belongs to the runtime") != std::string::npos);
  CHECK(problem("0000000000000000 T PMPI_Allreduce").find("outside lab01::") != std::string::npos);
  CHECK_FALSE(problem("0000000000000000 W other::thing()").empty());  // weak, not header code, not the reference's
}

TEST_CASE("calls to process control the loader and the environment fail", "[cpu]") {
  for (const char* call : {"exit", "_exit", "quick_exit", "fork", "execve", "system", "popen", "dlopen", "dlsym", "kill", "ptrace",
                           "syscall", "setenv", "putenv", "environ"}) {
    CHECK(problem(std::string("                 U ") + call).rfind("calls " + std::string(call), 0) == 0);
  }
  CHECK(problem("                 U exit_like_but_not").empty());
}

TEST_CASE("an indirect function and a symbol type nm letter the rules do not know fail", "[cpu]") {
  // g++ 12: __attribute__((ifunc("resolver"))) on a function in lab01:: and on the grader's name.
  CHECK(problem("0000000000000000 i lab01::fast_add(float, float)").find("GNU indirect function (ifunc)") != std::string::npos);
  CHECK(problem("0000000000000000 i gpulab::compare_within(std::vector<float, std::allocator<float> > const&, std::vector<double, std::allocator<double> > const&, std::vector<double, std::allocator<double> > const&)")
            .find("GNU indirect function") != std::string::npos);
  CHECK(problem("0000000000000000 Z lab01::thing").find("the grader does not know") != std::string::npos);
  for (const char* known : {"0000000000000000 T lab01::f()", "0000000000000000 t f()", "0000000000000000 b lab01::x",
                            "0000000000000000 r lab01::y", "                 w __gmon_start__"}) {
    CHECK(problem(known).empty());
  }
}

TEST_CASE("kernel entries and start-up functions are read from the disassembly and the section table", "[cpu]") {
  // objdump 2.40 of a g++ object with inline assembly, and of one whose constructor is nvcc's.
  const std::string disassembly =
      "0000000000000000 <lab01::(anonymous namespace)::leave()>:\n"
      "   0:\tmov    $0xe7,%eax\n"
      "   5:\tsyscall\n"
      "   7:\tret\n"
      "0000000000000010 <lab01::vector_add(float const*, float const*, float*, long, CUstream_st*)>:\n"
      "  10:\tint    $0x80\n"
      "  12:\tcall   17 <lab01::vector_add(float const*, float const*, float*, long, CUstream_st*)+0x7>\n"
      "  17:\tmov    %rdi,%rax\t# syscall is only a comment here\n";
  const std::vector<std::string> entries = kernel_entries(disassembly);
  REQUIRE(entries.size() == 2);
  CHECK(entries[0] == "syscall in lab01::(anonymous namespace)::leave()");
  CHECK(entries[1].rfind("int $0x80 in lab01::vector_add(", 0) == 0);
  CHECK(kernel_entries("0000000000000000 <lab01::f()>:\n   0:\tsvc\t#0x0\n").size() == 1);  // AArch64
  const std::string sections =
      "Idx Name          Size      VMA               LMA               File off  Algn\n"
      "  0 .text         000001a2  0000000000000000  0000000000000000  00000040  2**4\n"
      "                  CONTENTS, ALLOC, LOAD, RELOC, READONLY, CODE\n"
      " 14 .init_array   00000008  0000000000000000  0000000000000000  00019b68  2**3\n"
      " 15 .fini_array.00101 00000010  0000000000000000  0000000000000000  00019b70  2**3\n"
      " 16 .init_array_lookalike 00000100  0000000000000000  0000000000000000  00019b80  2**3\n";
  CHECK(startup_entries(sections) == 3);
  CHECK(startup_entries("") == 0);
  // g++ 12's initializer for a file that includes <iostream>: the header's, not the learner's;
  // the same with a constructor of the learner's merged into it is the learner's.
  const std::string iostream_only =
      "0000000000000000 <_GLOBAL__sub_I__ZN5lab071fEi>:\n"
      "   1:\tlea    0x0(%rip),%rbx        # 8 <_GLOBAL__sub_I__ZN5lab071fEi+0x8>\n"
      "\t\t\t4: R_X86_64_PC32\t.bss-0x4\n"
      "   b:\tcall   10 <_GLOBAL__sub_I__ZN5lab071fEi+0x10>\n"
      "\t\t\tc: R_X86_64_PLT32\tstd::ios_base::Init::Init()-0x4\n"
      "  10:\tmov    0x0(%rip),%rdi        # 17 <_GLOBAL__sub_I__ZN5lab071fEi+0x17>\n"
      "\t\t\t13: R_X86_64_REX_GOTPCRELX\tstd::ios_base::Init::~Init()-0x4\n"
      "  1b:\tlea    0x0(%rip),%rdx        # 22 <_GLOBAL__sub_I__ZN5lab071fEi+0x22>\n"
      "\t\t\t1e: R_X86_64_PC32\t__dso_handle-0x4\n"
      "  22:\tjmp    27 <_GLOBAL__sub_I__ZN5lab071fEi+0x27>\n"
      "\t\t\t23: R_X86_64_PLT32\t__cxa_atexit-0x4\n";
  const std::vector<ObjectFunction> header = parse_objdump(iostream_only);
  REQUIRE(header.size() == 1);
  CHECK(iostream_initializer_only(header[0]));
  const std::vector<ObjectFunction> mixed = parse_objdump(iostream_only + "\t\t\t30: R_X86_64_PLT32\treadlink-0x4\n");
  REQUIRE(mixed.size() == 1);
  CHECK_FALSE(iostream_initializer_only(mixed[0]));
}

TEST_CASE("a call of exit only in nvcc's host stubs of __device__ functions is the compiler's and any other is the learner's", "[cpu]") {
  // Recorded: objdump -d -r -C --no-show-raw-insn of lab 04's skeleton hgemm.cu.o (nvcc 13, g++ 12
  // -O3), whose empty __device__ helpers cudafe++ gives the host body { volatile int ___ = 1; exit(___); };
  // and a g++ -O0 object with the same stub beside a host function that calls exit for real.
  const std::string nvcc_o3 =
      "0000000000000000 <lab04::hgemm_v1_wmma_naive(lab04::Operands)>:\n"
      "   0:\tsub    $0x18,%rsp\n"
      "   4:\tcall   9 <lab04::hgemm_v1_wmma_naive(lab04::Operands)+0x9>\n"
      "\t\t\t5: R_X86_64_PLT32\t__device_stub__ZN5lab0419hgemm_v1_wmma_naiveENS_8OperandsE(lab04::Operands&)-0x4\n"
      "00000000000004f0 <lab04::(anonymous namespace)::mma_warp_step(__half const*, __half const*, float (*) [4][4], int, int)>:\n"
      "     4f0:\tsub    $0x18,%rsp\n"
      "     4f4:\tmovl   $0x1,0xc(%rsp)\n"
      "     4fc:\tmov    0xc(%rsp),%edi\n"
      "     500:\tcall   505 <lab04::(anonymous namespace)::mma_warp_step(__half const*, __half const*, float (*) [4][4], int, int)+0x15>\n"
      "\t\t\t501: R_X86_64_PLT32\texit-0x4\n"
      "     505:\tdata16 cs nopw 0x0(%rax,%rax,1)\n";
  const std::vector<ObjectFunction> skeleton = parse_objdump(nvcc_o3);
  REQUIRE(skeleton.size() == 2);
  CHECK(skeleton[1].name == "lab04::(anonymous namespace)::mma_warp_step(__half const*, __half const*, float (*) [4][4], int, int)");
  CHECK(skeleton[1].references == std::set<std::string>{"exit"});
  CHECK(is_device_function_stub(skeleton[1]));
  CHECK_FALSE(is_device_function_stub(skeleton[0]));
  const std::string source = "namespace lab04 {\nnamespace {\n__device__ void mma_warp_step(const __half*, const __half*, float[4][4][4], int, int) {}\n"
                             "__host__ __device__ int both(int x) { return x; }\n}  // namespace\n}\n";
  CHECK(only_device_stubs_reference(skeleton, {}, source, "exit"));
  CHECK_FALSE(only_device_stubs_reference(skeleton, {}, source, "fork"));  // nothing references it: not the stubs' either
  // The same shape in a function the source does not declare __device__ is the learner's own call.
  CHECK_FALSE(only_device_stubs_reference(skeleton, {}, "void mma_warp_step(const __half*);", "exit"));
  CHECK_FALSE(declared_device_only(source, "both"));
  CHECK_FALSE(declared_device_only(source, "warp_step"));  // a whole word only
  // exit's address in a table (no call a disassembly shows) is a reference all the same.
  const std::string relocations =
      "RELOCATION RECORDS FOR [.text]:\nOFFSET           TYPE              VALUE\n0000000000000501 R_X86_64_PLT32    exit-0x0000000000000004\n\n"
      "RELOCATION RECORDS FOR [.data.rel.local]:\nOFFSET           TYPE              VALUE\n0000000000000000 R_X86_64_64       exit\n\n"
      "RELOCATION RECORDS FOR [.eh_frame]:\nOFFSET           TYPE              VALUE\n0000000000000020 R_X86_64_PC32     .text+0x00000000000004f0\n";
  const std::set<std::string> data = data_references(relocations);
  CHECK(data == std::set<std::string>{"exit"});
  CHECK_FALSE(only_device_stubs_reference(skeleton, data, source, "exit"));
  // nvcc's stub as g++ writes it for AArch64.
  const std::vector<ObjectFunction> arm = parse_objdump(
      "0000000000000000 <lab04::mma_warp_step(__half const*)>:\n   0:\tstp\tx29, x30, [sp, #-32]!\n   4:\tmov\tx29, sp\n"
      "   8:\tmov\tw0, #0x1                   \t// #1\n   c:\tstr\tw0, [sp, #28]\n  10:\tldr\tw0, [sp, #28]\n  14:\tbl\t0 <exit>\n"
      "\t\t\t14: R_AARCH64_CALL26\texit\n");
  REQUIRE(arm.size() == 1);
  CHECK(is_device_function_stub(arm[0]));

  const std::string gcc_o0 =
      "0000000000000000 <stub(float const*, int, int)>:\n"
      "   0:\tpush   %rbp\n   1:\tmov    %rsp,%rbp\n   4:\tsub    $0x20,%rsp\n   8:\tmov    %rdi,-0x18(%rbp)\n"
      "   c:\tmov    %esi,-0x1c(%rbp)\n   f:\tmov    %edx,-0x20(%rbp)\n  12:\tmovl   $0x1,-0x4(%rbp)\n"
      "  19:\tmov    -0x4(%rbp),%eax\n  1c:\tmov    %eax,%edi\n  1e:\tcall   23 <real(int)>\n"
      "\t\t\t1f: R_X86_64_PLT32\texit-0x4\n"
      "\n"
      "0000000000000023 <real(int)>:\n"
      "  23:\tpush   %rbp\n  24:\tmov    %rsp,%rbp\n  27:\tsub    $0x10,%rsp\n  2b:\tmov    %edi,-0x4(%rbp)\n"
      "  2e:\tcmpl   $0x3,-0x4(%rbp)\n  32:\tjle    41 <real(int)+0x1e>\n  34:\tmov    -0x4(%rbp),%eax\n"
      "  37:\tsub    $0x3,%eax\n  3a:\tmov    %eax,%edi\n  3c:\tcall   41 <real(int)+0x1e>\n"
      "\t\t\t3d: R_X86_64_PLT32\texit-0x4\n"
      "  41:\tnop\n  42:\tleave\n  43:\tret\n";
  const std::vector<ObjectFunction> mixed = parse_objdump(gcc_o0);
  REQUIRE(mixed.size() == 2);
  CHECK(is_device_function_stub(mixed[0]));
  CHECK_FALSE(is_device_function_stub(mixed[1]));  // exit(code - 3): the learner's own call
  CHECK_FALSE(only_device_stubs_reference(mixed, {}, "__device__ void stub(const float*, int, int);\n__device__ void real(int);", "exit"));
}

TEST_CASE("time limits follow the reference's own time within a floor and a cap", "[cpu]") {
  CHECK(derived_limit(0.3, 10, 120) == 10);     // the floor: start-up and a loaded machine
  CHECK(derived_limit(2.0, 10, 120) == 25);     // 10 × 2 s + 5 s
  CHECK(derived_limit(50.0, 10, 120) == 120);   // the lab's own limit caps it
  CHECK(describe_limit(2.0, 10, 120) == "10 × the reference's 2.0 s + 5 s, at least 10 s, at most 120 s");
}

TEST_CASE("the reference profile is kept per reference build", "[cpu]") {
  gpulab::testing::TempTree t("profile");
  const fs::path file = t.paths.root / "profile.json";
  {
    ReferenceProfile p(file, "build-1");
    p.put(ReferenceProfile::key("adds", 3, false), {560, 0.7, 42});
    p.save();
  }
  const ReferenceProfile same(file, "build-1"), other(file, "build-2");
  REQUIRE(same.find("adds @W=3") != nullptr);
  CHECK(same.find("adds @W=3")->assertions == 560);
  CHECK(other.find("adds @W=3") == nullptr);  // another reference build: measured again
  CHECK(ReferenceProfile::key("adds", 0, true) == "adds @emulator");
}

TEST_CASE("a baseline slowed beside the learner's code is not trusted", "[cpu]") {
  PerfSamples mine, theirs;
  mine.baseline = {1.0, 1.1, 0.9};
  theirs.baseline = {2.0, 2.1, 1.9};
  CHECK(baseline_mismatch(mine, theirs).find("50 % of the one measured beside the reference's") != std::string::npos);
  mine.baseline = {1.8, 1.9, 2.0};
  CHECK(baseline_mismatch(mine, theirs).empty());
}

TEST_CASE("a baseline that disagrees is measured again while rounds and time are left and then fails", "[cpu]") {
  VerdictRules rules;
  rules.max_rounds = 3;
  rules.time_cap_s = 60;
  PerfSamples mine, theirs;
  mine.fraction = {0.9};
  mine.baseline = {0.65};  // the plain-ring plant's CI round: its library baseline under load
  theirs.baseline = {1.19};
  CHECK(measure_again_for_baseline(mine, theirs, rules, 5.0));
  CHECK_FALSE(measure_again_for_baseline(mine, theirs, rules, 61.0));  // out of time
  mine.fraction = {0.9, 0.9, 0.9};
  mine.baseline = {0.65, 0.6, 0.62};
  CHECK_FALSE(measure_again_for_baseline(mine, theirs, rules, 5.0));  // out of rounds: "not trusted" stands
  CHECK_FALSE(baseline_mismatch(mine, theirs).empty());
  mine.fraction = {0.9};
  mine.baseline = {1.1};
  CHECK_FALSE(measure_again_for_baseline(mine, theirs, rules, 5.0));  // agreeing baselines: the decision stands
}

TEST_CASE("the tree guard finds a change and puts it back", "[cpu]") {
  gpulab::testing::TempTree t("guard");
  t.write("build/ref.exe", "reference");
  t.write(".gpulab/progress.json", "{}");
  TreeGuard guard({t.paths.root / "build/ref.exe"}, {t.paths.root / "solutions/05-x"}, {t.paths.root / ".gpulab/progress.json"},
                  t.paths.root / "build/snapshot");
  CHECK(guard.check_and_repair().empty());
  const std::string original = t.read("solutions/05-x/a.cu");
  t.write("solutions/05-x/a.cu", "int a() { return 2; }\n");
  t.write("solutions/05-x/extra.cu", "added\n");
  CHECK(guard.check_and_repair().find("a.cu changed") != std::string::npos);
  CHECK(t.read("solutions/05-x/a.cu") == original);
  CHECK_FALSE(fs::exists(t.paths.root / "solutions/05-x/extra.cu"));
  t.write(".gpulab/progress.json", R"({"02": {"failed": 0}})");
  CHECK(guard.check_and_repair().find("progress.json changed") != std::string::npos);
  CHECK(t.read(".gpulab/progress.json") == "{}");
  t.write("build/ref.exe", "tampered");
  CHECK(guard.check_and_repair().find("ref.exe changed") != std::string::npos);
  CHECK_FALSE(fs::exists(t.paths.root / "build/ref.exe"));  // removed: the next build makes it again
  CHECK(guard.check_and_repair().find("ref.exe was removed") != std::string::npos);
}
