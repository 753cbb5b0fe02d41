/// @file mesh.cpp
/// @brief Lab 10 — the TP × DP mesh: W = t × D ranks as D replicas of a model split over t, and
/// the gradient synchronisation each kind of parameter needs. Read lessons/10-tensor-parallel.md,
/// section "TODO(10.6)".
///
/// Napkin math: tensor parallelism communicates every layer (4 all-reduces of R·d floats per
/// block and step), data parallelism once per step (the gradients, 12d²/t floats per block). So
/// the tensor group goes on the fast links (consecutive ranks: one node, NVLink) and the data
/// group across nodes.
#include <mpi.h>

#include <stdexcept>
#include <string>

#include "tp.hpp"

namespace lab10 {

using gpulab::dist::CollectiveRequest;

// TODO(10.6): The mesh's two groups, and each parameter's gradient synchronised over the right one
// See lessons/10-tensor-parallel.md, section "TODO(10.6)".
Mesh make_mesh(MPI_Comm world, int t, gpulab::dist::Backend backend) {
  (void)world; (void)t; (void)backend;  // delete once you use them
  return {};
}

void sync_gradients(Mesh& mesh, const std::vector<TPParameter>& params, bool sequence_parallel) {
  (void)mesh; (void)params; (void)sequence_parallel;  // delete once you use them
}

}  // namespace lab10
