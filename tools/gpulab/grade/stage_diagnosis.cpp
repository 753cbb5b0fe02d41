/// @file stage_diagnosis.cpp
/// @brief The diagnosis stage: each of the learner's kernels' registers, shared memory and spills (ptxas), never a verdict.
#include <algorithm>

#include "grade/grade_stages.hpp"

namespace gpulab::cli {

Diagnosis stage_diagnosis(const GradeInputs& in, Scorecard& card) {
  Diagnosis diagnosis;
  // Informational, never a verdict: each kernel's registers, shared memory and spills.
  std::vector<KernelResources> reference;
  std::string error;
  const LabPart* part = in.lab.part(in.options.part);
  for (const std::string& f : in.lab.sources) {
    if (fs::path(f).extension() != ".cu") continue;
    if (part != nullptr && std::find(part->sources.begin(), part->sources.end(), f) == part->sources.end()) continue;
    for (auto& k : kernel_resources(in.paths.build, in.compiled_dir / f, error)) diagnosis.ptxas.push_back(k);
    if (in.graded_is_reference()) continue;
    for (auto& k : kernel_resources(in.paths.build, in.lab.solutions / f, error)) reference.push_back(k);
  }
  if (diagnosis.ptxas.empty() && error.empty()) return diagnosis;
  Check c;
  c.name = "resources per kernel (ptxas)";
  c.kind = Kind::kDiagnosis;
  c.status = Status::kInfo;
  if (diagnosis.ptxas.empty()) {
    c.details.push_back("not available: " + error);
  } else {
    describe_resources(diagnosis.ptxas, reference, c.details, c.hints);
  }
  if (in.options.quiet) {
    card.keep(c);
  } else {
    card.add(c);
  }
  return diagnosis;
}

}  // namespace gpulab::cli
