/// @file proc_tree.hpp
/// @brief Every process below a given one, from /proc: what the grader (process.cpp) and
/// gpulab-launch (launch/launch.cpp, which links nothing of the CLI: hence header-only) kill when a
/// command has ended. POSIX and Linux's /proc only.
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

namespace gpulab::cli {

/// Every process below @p root (children, grandchildren, ...), by the parent links in /proc.
inline std::vector<pid_t> descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid)
  if (DIR* proc = opendir("/proc")) {
    while (dirent* e = readdir(proc)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0) continue;
      char path[64];
      std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
      if (FILE* f = std::fopen(path, "r")) {
        char buf[512];
        const std::size_t got = std::fread(buf, 1, sizeof buf - 1, f);
        std::fclose(f);
        buf[got] = '\0';
        // "pid (comm) state ppid ...": comm may hold spaces, so parse after the last ')'.
        const char* close = std::strrchr(buf, ')');
        char state = 0;
        long ppid = 0;
        if (close != nullptr && std::sscanf(close + 1, " %c %ld", &state, &ppid) == 2) {
          parent_of.emplace_back(static_cast<pid_t>(pid), static_cast<pid_t>(ppid));
        }
      }
    }
    closedir(proc);
  }
  std::vector<pid_t> found = {root};
  for (std::size_t k = 0; k < found.size(); ++k) {
    for (const auto& [pid, ppid] : parent_of) {
      if (ppid == found[k]) found.push_back(pid);
    }
  }
  found.erase(found.begin());
  return found;
}

}  // namespace gpulab::cli
