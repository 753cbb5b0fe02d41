/// @file stage_integrity.cpp
/// @brief The learner's processes under guard (LearnerRuns) and the integrity stage: the grader's files and the learner's trees unchanged by grading.
#include "grade/grade_stages.hpp"

namespace gpulab::cli {

void LearnerRuns::arm(const GradeInputs& in) {
  std::vector<fs::path> artefacts;
  for (const std::string& f : in.lab.build.grader_files) artefacts.emplace_back(f);
  if (const Variant* emu_ref = in.lab.build.variant("emu_ref"); emu_ref != nullptr && fs::exists(emu_ref->exe)) artefacts.emplace_back(emu_ref->exe);
  const std::vector<fs::path> documents = {in.paths.state_dir() / "progress.json", in.paths.state_dir() / "hints.json"};
  guard_ = TreeGuard(artefacts, {in.lab.tests, in.lab.solutions}, documents, in.paths.build / "grade" / ("snapshot-" + in.lab.number));
  if (!in.options.sandbox) return;
  for (const fs::path& p : artefacts) read_only_.push_back(p.string());
  for (const fs::path& p : documents) read_only_.push_back(p.string());
  for (const fs::path& p : {in.lab.tests, in.lab.solutions, in.paths.build / "labinfo"}) read_only_.push_back(p.string());
}

bool LearnerRuns::untampered(Scorecard& card) {
  if (!guard_.armed()) return true;
  const std::string change = guard_.check_and_repair();
  if (change.empty()) return true;
  card.add(Check::failure("the grader's files unchanged", Kind::kIntegrity,
                          change + " while the code under test ran: tampering, so the grade stops here (it was put back)",
                          "the code of a lab reads and writes only the buffers it is given"));
  return false;
}

void stage_integrity(const GradeInputs& in, const TreesBefore& before, LearnerRuns& runs, Scorecard& card) {
  if (!runs.untampered(card)) return;
  // Grading never changes the learner's files or the reference.
  std::string change = first_tree_change(before.labs, hash_tree(in.lab.labs), "labs/" + in.lab.slug + "/");
  if (change.empty()) change = first_tree_change(before.solutions, hash_tree(in.lab.solutions), "solutions/" + in.lab.slug + "/");
  if (change.empty() && in.sources == Sources::kSubmission) {
    change = first_tree_change(before.submission, hash_tree(in.source_dir), in.source_dir.string() + "/");
  }
  if (!change.empty()) {
    card.add(Check::failure("sources unchanged by grading", Kind::kIntegrity, change + " while grading"));
  }
}

}  // namespace gpulab::cli
