-- +goose Up
-- The sweeper reads passed deadlines in (deadline, id) order, a batch at a
-- time, each after the last one read. With the deadline alone in the index,
-- every batch after the first read and sorted all the deadlines still due
-- (100,000 expired leases: about five million rows over one sweep); with
-- the id beside it, each batch is one range of the index. Same rows, same
-- predicate: an action's write touches no more indexes than before.
CREATE INDEX actions_deadline_id_idx ON actions (deadline, id) WHERE deadline IS NOT NULL;
DROP INDEX actions_deadline_idx;

-- +goose Down
CREATE INDEX actions_deadline_idx ON actions (deadline) WHERE deadline IS NOT NULL;
DROP INDEX actions_deadline_id_idx;
