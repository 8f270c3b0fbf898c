#pragma once
// An output folder written whole or not at all (Note [output folders]). Internal to zt_data.
//
// Note [output folders]: the files go into a fresh folder beside the destination
// ("<out>.tmp.<pid>.<hex>"); commit() swaps it with the destination in one rename
// (renameat2 RENAME_EXCHANGE; two renames where the filesystem lacks it) and removes what was
// there. A run that fails leaves the earlier output untouched. A destination is replaced only
// when it is empty or its manifest.json names `writer`, so a wrong --out cannot delete a
// folder of something else. A run holds a shared flock on its temporary; the next run on the same
// destination removes the temporaries of runs that were interrupted (said in one line): those
// whose pid no longer runs and whose lock nobody holds (a pid alone could be another host's, over
// a shared filesystem). Where flock cannot tell (NFS), a temporary is left.
#include <functional>
#include <string>

namespace zt::data::detail {

class OutputDir {
 public:
  // `note` hears of the stale temporaries removed.
  OutputDir(std::string path, std::string writer, const std::function<void(const std::string&)>& note = {});
  ~OutputDir();  // removes the temporary folder unless committed
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  std::string file(const std::string& name) const;  // a path inside the temporary folder
  void commit();

  const std::string& path() const { return path_; }

 private:
  void check_replaceable() const;
  void remove_stale_temporaries(const std::function<void(const std::string&)>& note) const;
  std::string path_, tmp_, writer_;
  int lock_fd_ = -1;  // the temporary, flocked shared while this run may write it
  bool committed_ = false;
};

}  // namespace zt::data::detail
