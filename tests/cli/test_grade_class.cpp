/// @file test_grade_class.cpp
/// @brief grade-class's gate before anything is unpacked: archive listings (GNU tar's and
/// Info-ZIP's, as they print them) read, and what must never be unpacked refused with its reason.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "author/grade_class.hpp"

using gpulab::cli::archive_problem;
using gpulab::cli::ArchiveEntry;

TEST_CASE("grade-class reads tar listings and refuses traversal and absolute paths and links and huge entries", "[cpu]") {
  // `tar -tvPf` (GNU tar 1.34), names as stored.
  const std::string listing =
      "drwxr-xr-x ada/ada           0 2026-12-04 13:01 lab12/\n"
      "-rw-r--r-- ada/ada        7713 2026-12-04 08:53 lab12/blocks.cpp\n"
      "-rw-r--r-- ada/ada       10215 2026-12-04 08:36 lab12/my cache.cpp\n";
  const auto entries = gpulab::cli::parse_tar_listing(listing);
  REQUIRE(entries.size() == 3);
  CHECK(entries[0].type == 'd');
  CHECK(entries[2].name == "lab12/my cache.cpp");
  CHECK(entries[2].size == 10215);
  CHECK(archive_problem(entries).empty());
  auto with = [&](const std::string& line) { return archive_problem(gpulab::cli::parse_tar_listing(listing + line)); };
  CHECK(with("-rw-r--r-- 0/0               5 1970-01-01 00:00 ../../escaped.txt\n") == "../../escaped.txt leaves the archive's folder (..)");
  CHECK(with("-rw-r--r-- 0/0               5 1970-01-01 00:00 lab12/../../x\n") == "lab12/../../x leaves the archive's folder (..)");
  CHECK(with("-rw-r--r-- 0/0               5 1970-01-01 00:00 /tmp/abs.txt\n") == "/tmp/abs.txt is an absolute path");
  CHECK(with("lrwxrwxrwx ada/ada           0 2026-12-04 13:01 lab12/secret -> /etc/passwd\n") == "lab12/secret is a link");
  CHECK(with("hrw-r--r-- ada/ada           0 2026-12-04 13:01 lab12/copy link to lab12/blocks.cpp\n") == "lab12/copy is a link");
  CHECK(with("crw-r--r-- root/root       1,3 2026-12-04 13:01 lab12/null\n") == "lab12/null is not a file or a folder");
  CHECK(with("-rw-r--r-- ada/ada     5242880 2026-12-04 13:01 lab12/huge.bin\n") == "lab12/huge.bin is over 4 MiB");
  // tar's own warnings are not entries: the archive is refused as unreadable.
  CHECK_THROWS(gpulab::cli::parse_tar_listing("tar: Removing leading `../' from member names\n" + listing));
  std::vector<ArchiveEntry> many(10001, ArchiveEntry{"f", 'f', 1});
  CHECK(archive_problem(many) == "more than 10000 entries");
  std::vector<ArchiveEntry> heavy(20, ArchiveEntry{"f", 'f', 4u << 20});
  CHECK(archive_problem(heavy) == "over 64 MiB in all");
}

TEST_CASE("grade-class reads zipinfo listings and refuses traversal and links", "[cpu]") {
  // `zipinfo -l` (Info-ZIP 3.0): a header, one line per entry, a totals line.
  const std::string listing =
      "Archive:  mal.zip\n"
      "Zip file size: 11028 bytes, number of entries: 4\n"
      "drwxr-xr-x  3.0 unx        0 bx        0 stor 26-Dec-04 13:01 lab12/\n"
      "-rw-r--r--  3.0 unx     7713 tx     1987 defN 26-Dec-04 13:01 lab12/blocks.cpp\n"
      "?rw-------  2.0 unx     9412 b-     9412 stor 26-Dec-04 09:23 lab12/scheduler.cpp\n"
      "-rw-a--     2.0 fat      120 t-       90 defN 26-Dec-04 09:23 lab12/notes.txt\n"
      "4 files, 17245 bytes uncompressed, 11489 bytes compressed:  33.4%\n";
  const auto entries = gpulab::cli::parse_zipinfo_listing(listing);
  REQUIRE(entries.size() == 4);
  CHECK(entries[0].type == 'd');
  CHECK(entries[1].size == 7713);
  CHECK(entries[2].type == 'f');  // no file type recorded: unzip writes a plain file
  CHECK(archive_problem(entries).empty());
  const auto link = gpulab::cli::parse_zipinfo_listing("lrwxrwxrwx  3.0 unx       11 bx       11 stor 26-Dec-04 13:01 secret\n");
  CHECK(archive_problem(link) == "secret is a link");
  const auto slip = gpulab::cli::parse_zipinfo_listing("?rw-------  2.0 unx        4 b-        4 stor 26-Dec-04 13:01 ../zip-escaped.txt\n");
  CHECK(archive_problem(slip) == "../zip-escaped.txt leaves the archive's folder (..)");
}

TEST_CASE("grade-class names students after their file or folder", "[cpu]") {
  CHECK(gpulab::cli::student_of("ada.tar.gz") == "ada");
  CHECK(gpulab::cli::student_of("bob.tgz") == "bob");
  CHECK(gpulab::cli::student_of("cat.zip") == "cat");
  CHECK(gpulab::cli::student_of("dan.tar") == "dan");
  CHECK(gpulab::cli::student_of("eve") == "eve");
  CHECK(gpulab::cli::student_of(".DS_Store").empty());
  CHECK(gpulab::cli::student_of("notes.pdf").empty());
}
