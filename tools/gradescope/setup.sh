#!/usr/bin/env bash
# Gradescope's setup.sh for gpulab lab @LAB@ (written by `gpulab bundle @LAB@ --for gradescope`).
# Gradescope runs it once, as root, when it builds the autograder's image: it unpacks the course
# (course.tar.gz, the instructor's tree at the commit the bundle was made from), installs its
# Debian/Ubuntu packages and builds it (./gpulab does both), so that each submission only builds
# the student's files.
#
# The image needs the CUDA toolkit for the GPU labs and gpulab::nn (nvcc on PATH or in
# /usr/local/cuda): Gradescope's base images have none, so use an image with it (Gradescope's
# "manual docker configuration") or expect those labs to be reported as not built. The [gpu] checks
# need a GPU, which Gradescope's machines do not have: they are reported as not run, never passed.
set -euo pipefail
root="${GRADESCOPE_ROOT:-/autograder}"
course="$root/course"
rm -rf "$course"
mkdir -p "$course"
tar -xzf "$root/source/course.tar.gz" -C "$course"
cd "$course"
command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] ||
  echo "setup.sh: no CUDA toolkit in this image: the GPU labs and gpulab::nn will not build" >&2
./gpulab doctor || true  # installs what is missing (as root), configures and builds the CLI; exit 2 = GPU parts missing
./gpulab grade @LAB@ --solutions --quiet >/dev/null 2>&1 || true  # builds the reference and its tests once, here
