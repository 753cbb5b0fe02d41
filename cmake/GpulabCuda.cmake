# The CUDA toolkit is optional: without it the CLI and the host-only tests still build, and
# `gpulab doctor` explains how to get one. With it, CUDA code is compiled for:
#   - CMAKE_CUDA_ARCHITECTURES if given (-D or the GPULAB_CUDA_ARCHITECTURES environment variable);
#   - "native" when a GPU is visible (nvidia-smi lists one);
#   - otherwise one fixed architecture, 75 (Turing, the oldest CUDA 13 supports): CMake's
#     "native" fails where no GPU is present, and CI only needs the code to compile once.
option(GPULAB_ENABLE_CUDA "Build the CUDA parts when a CUDA toolkit is found" ON)
set(GPULAB_HAVE_CUDA OFF)

if(GPULAB_ENABLE_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(_arch "75")
      if(DEFINED ENV{GPULAB_CUDA_ARCHITECTURES})
        set(_arch "$ENV{GPULAB_CUDA_ARCHITECTURES}")
      else()
        find_program(GPULAB_NVIDIA_SMI nvidia-smi)
        if(GPULAB_NVIDIA_SMI)
          execute_process(COMMAND ${GPULAB_NVIDIA_SMI} -L RESULT_VARIABLE _rc OUTPUT_VARIABLE _gpus
                          ERROR_QUIET TIMEOUT 20)
          if(_rc EQUAL 0 AND _gpus MATCHES "GPU 0")
            set(_arch "native")
          endif()
        endif()
      endif()
      set(CMAKE_CUDA_ARCHITECTURES "${_arch}" CACHE STRING "CUDA architectures to compile for")
    endif()
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(GPULAB_HAVE_CUDA ON)
    message(STATUS "gpulab: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
  else()
    message(WARNING "gpulab: no CUDA toolkit found; building the CLI and host-only tests only. "
                    "Run ./gpulab doctor for how to install one.")
  endif()
endif()

# NCCL: the multi-GPU backend of the distributed labs (optional; without it the NCCL backend
# reports that it is not built in).
set(GPULAB_HAVE_NCCL OFF)
if(GPULAB_HAVE_CUDA)
  find_package(NCCL QUIET)
  if(NCCL_FOUND)
    set(GPULAB_HAVE_NCCL ON)
    message(STATUS "gpulab: NCCL ${NCCL_LIBRARY}")
  endif()
endif()
