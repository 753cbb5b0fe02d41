#!/usr/bin/perl
# Rewrites a .cu file into C++ for the CPU block emulator (emu.hpp); reads stdin, writes stdout.
#   kernel<<<config>>>(args);      -> emu::Launch(config).of(kernel).run([&] { kernel(args); });
#   extern __shared__ T name[];    -> T* name = emu::dynamic_shared<T>();
#   __shared__ arrays of a kernel  -> also registered after the kernel, so that the emulated
#                                     cudaFuncGetAttributes reports the kernel's static shared memory
#   #include "gpulab/check.hpp"    -> removed (emu.hpp defines CUDA_CHECK and CUDA_CHECK_LAUNCH)
use strict;
use warnings;

local $/;
my $src = <STDIN>;

$src =~ s/(\w+)<<<(.*?)>>>\((.*?)\);/emu::Launch($2).of($1).run([&] { $1($3); });/gs;
$src =~ s/extern\s+__shared__\s+([\w:]+)\s+(\w+)\s*\[\s*\]\s*;/$1* $2 = emu::dynamic_shared<$1>();/g;
$src =~ s/#include "gpulab\/check.hpp"\n//;

# Each __global__ function: find its body by counting braces, sum its __shared__ declarations.
my $out = '';
my $pos = 0;
while ($src =~ /__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(/g) {
  my $name = $1;
  my $open = index($src, '{', pos($src));
  next if $open < 0;
  my ($depth, $i) = (0, $open);
  for (; $i < length($src); ++$i) {
    my $c = substr($src, $i, 1);
    $depth++ if $c eq '{';
    if ($c eq '}') { $depth--; last if $depth == 0; }
  }
  my $body = substr($src, $open, $i - $open + 1);
  my @sizes;
  while ($body =~ /(?<!extern\s)__shared__\s+(?:__align__\(\d+\)\s+)?([\w:]+(?:\s+[\w:]+)*?)\s+(\w+)\s*((?:\[[^\]]+\])+)\s*;/g) {
    push @sizes, "sizeof($1$3)";
  }
  $out .= substr($src, $pos, $i + 1 - $pos);
  if (@sizes) {
    $out .= "\nstatic emu::SharedRegistration emu_shared_$name(reinterpret_cast<const void*>(&$name), " . join(' + ', @sizes) . ");";
  }
  $pos = $i + 1;
  pos($src) = $pos;
}
$out .= substr($src, $pos);
print "#include \"emu.hpp\"\n", $out;
