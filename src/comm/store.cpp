// Rendezvous stores (zt/comm/store.h): a shared folder, or a group that already exists.
#include "zt/comm/store.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "zt/comm/group.h"
#include "zt/core/atomic_file.h"

namespace zt::comm {

void check_store_key(const std::string& key) {
  const bool ok = !key.empty() && key.size() <= 200 && key[0] != '.' && key.find('/') == std::string::npos &&
                  key.find("..") == std::string::npos && key.find('\0') == std::string::npos;
  ZT_CHECK(ok, "[comm] store: invalid key '", key,
           "' (a key is one file name: 1 to 200 characters, no '/', no '..', not starting with '.')");
}

FileStore::FileStore(std::string dir) : dir_(std::move(dir)) {
  ZT_CHECK(!dir_.empty(), "[comm] store: the folder name is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);  // every rank may race to create it: fine
  std::error_code ec_dir;
  ZT_CHECK_AS(ErrorKind::comm, std::filesystem::is_directory(dir_, ec_dir), "[comm] store: cannot create folder ", dir_,
              ec ? ": " + ec.message() : std::string(" (something else has that name)"));
}

// Atomic (a unique temporary, then rename), so a reader sees the whole value or no file.
void FileStore::set(const std::string& key, const std::string& value) {
  check_store_key(key);
  write_file_atomic(dir_ + "/" + key, value, ErrorKind::comm, "[comm] store:");
}

std::string FileStore::get(const std::string& key, double timeout_s) {
  check_store_key(key);
  ZT_CHECK(timeout_s >= 0, "[comm] store: timeout must be >= 0 s, got ", timeout_s);
  using Clock = std::chrono::steady_clock;
  const std::string path = dir_ + "/" + key;
  const auto wait = std::chrono::duration<double>(std::clamp(timeout_s, 0.0, 1e8));  // clamp: no overflow
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(wait);
  auto pause = std::chrono::milliseconds(2);  // grows to 50 ms: quick when peers are, cheap when not
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::string value((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      ZT_CHECK_AS(ErrorKind::comm, !in.bad(), "[comm] store: cannot read key '", key, "' from ", path);
      return value;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", timeout_s);
      ZT_THROW_AS(ErrorKind::comm, "[comm] store: key '", key, "' did not appear in ", dir_, " within ", secs, " s");
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

std::shared_ptr<Store> make_file_store(const std::string& dir) { return std::make_shared<FileStore>(dir); }

namespace {

// Note [store order]: set and get are one collective. An all_reduce (max) of {setter's rank,
// minus setter's rank, value length} finds the one setter and the length; it then broadcasts
// the bytes, packed into i32 elements (collectives take no byte type), staged through the
// group's device.
class GroupStore : public Store {
 public:
  explicit GroupStore(std::shared_ptr<Group> group) : g_(std::move(group)) {
    ZT_CHECK(g_ != nullptr, "[comm] store: make_group_store needs a group");
  }
  void set(const std::string& key, const std::string& value) override { exchange(key, &value, 0); }
  std::string get(const std::string& key, double timeout_s) override { return exchange(key, nullptr, timeout_s); }

 private:
  std::string exchange(const std::string& key, const std::string* value, double timeout_s) {
    check_store_key(key);
    ZT_CHECK(!value || value->size() <= size_t(INT32_MAX) - 3, "[comm] store: the value of key '", key, "' has ",
             value->size(), " bytes, more than a group store carries");
    const std::string label = "store key '" + key + "'";
    const int me = g_->rank();
    Tensor head = Tensor::empty({3}, DType::i32, MemTag::comm);
    int32_t* h = head.data<int32_t>();
    h[0] = value ? me : -1;
    h[1] = value ? -me : INT32_MIN;
    h[2] = value ? int32_t(value->size()) : -1;
    Tensor on_device = head.to(g_->device());  // head itself on host groups
    g_->all_reduce(on_device, CollOptions(ReduceOp::max, label, timeout_s));
    head = on_device.to(Device::cpu());
    h = head.data<int32_t>();
    const int highest = h[0];
    ZT_CHECK_AS(ErrorKind::comm, highest >= 0, "[comm] store: no rank set key '", key,
                "' (with a group store one rank sets each key while the others get it)");
    const int lowest = -h[1];
    ZT_CHECK_AS(ErrorKind::comm, lowest == highest, "[comm] store: ranks ", lowest, " and ", highest, " both set key '",
                key, "' (with a group store one rank sets each key)");
    if (value) {
      if (g_->size() > 1 && !value->empty()) broadcast(*value, me, label, timeout_s);
      return *value;
    }
    std::string got(size_t(h[2]), '\0');
    if (!got.empty()) got = broadcast(got, highest, label, timeout_s);
    return got;
  }

  // `bytes` from `root`; every rank passes a string of the agreed length.
  std::string broadcast(const std::string& bytes, int root, const std::string& label, double timeout_s) {
    Tensor body = Tensor::empty({int64_t((bytes.size() + 3) / 4)}, DType::i32, MemTag::comm);
    std::memset(body.raw_data(), 0, body.nbytes());
    std::memcpy(body.raw_data(), bytes.data(), bytes.size());
    Tensor on_device = body.to(g_->device());
    g_->broadcast(on_device, root, CollOptions(ReduceOp::sum, label, timeout_s));
    body = on_device.to(Device::cpu());
    return std::string(static_cast<const char*>(body.raw_data()), bytes.size());
  }

  std::shared_ptr<Group> g_;
};

}  // namespace

std::shared_ptr<Store> make_group_store(std::shared_ptr<Group> group) {
  return std::make_shared<GroupStore>(std::move(group));
}

}  // namespace zt::comm
