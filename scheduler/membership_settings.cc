// See membership_settings.h.
#include "scheduler/membership_settings.h"

#include "common/sync_modes.h"

namespace r2sp {

MembershipOptions MembershipOptionsFor(const SchedulerOptions& options) {
  MembershipOptions m;
  m.num_servers = options.num_servers;
  m.num_workers = options.num_workers;
  m.sync = options.sync;
  m.heartbeat_timeout = options.heartbeat_timeout;
  m.server_replace_timeout = options.server_replace_timeout;
  proto::AddressBook& book = m.book_settings;
  book.set_partition_bytes(options.partition_bytes);
  book.set_sync(options.sync);
  book.set_staleness(options.staleness);
  if (Elastic(options.sync)) {
    book.set_elastic_period(options.elastic_period);
    book.set_elastic_alpha(options.elastic_alpha);
  }
  book.set_r2sp_slot_includes_pull(options.slots.includes_pull);
  book.set_job_id(options.job_id);
  book.set_absorb_orphaned_shards(options.absorb_orphaned_shards);
  book.set_heartbeat_timeout_ms(absl::ToInt64Milliseconds(options.heartbeat_timeout));
  if (options.slots.hetero_batching) book.set_global_batch(options.slots.batching.global_batch);
  return m;
}

}  // namespace r2sp
