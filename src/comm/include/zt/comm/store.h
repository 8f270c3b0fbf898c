#pragma once
// Rendezvous as its own interface, as c10d's Store: ranks exchange small values by key before a
// communicator exists (NCCL's unique id, which GPU each rank holds). Errors are ErrorKind::comm.
//
// Note [store order]: code meant for any store sets and gets keys in the same order on every
// rank, each key set by exactly one rank, since GroupStore is a collective: its set and get are
// one broadcast from the setter. Each rank exchanging a value with every other is then:
// for r in 0..n-1: r == me ? set(key r) : get(key r).
//
// Keys are one file name (FileStore keeps one file per key): 1 to 200 characters, no '/', no
// "..", not starting with '.' (a bad key is ErrorKind::invalid_argument). Values are any bytes.
#include <memory>
#include <string>

namespace zt::comm {

class Group;

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until `key` is set, at most timeout_s seconds; throws ErrorKind::comm naming the key.
  virtual std::string get(const std::string& key, double timeout_s) = 0;
};

// A folder every rank can see (local, or shared across machines), so ranks rendezvous without
// MPI. set writes <dir>/<key> atomically (a temporary, then rename); get polls for the file.
// Keys are not removed: use a fresh folder, or a prefix per run, for each job (a stale key from
// an earlier run would be read as this run's).
class FileStore : public Store {
 public:
  explicit FileStore(std::string dir);  // creates the folder if needed
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, double timeout_s) override;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

std::shared_ptr<Store> make_file_store(const std::string& dir);
// A store over an existing group, collective as Note [store order] says: every rank calls set
// or get for the same key at the same point. get's timeout is the broadcast's.
std::shared_ptr<Store> make_group_store(std::shared_ptr<Group> group);

// Throws ErrorKind::invalid_argument unless `key` is valid (see above); every store checks alike.
void check_store_key(const std::string& key);

}  // namespace zt::comm
