-- +goose Up
-- The evidence log (SPEC "Evidence"): every entry is a leaf of one Merkle
-- tree, in the order entries were committed. SQLite has one writer, so the
-- order of inserts is the order of commits: a trigger queues each new
-- entry (AUTOINCREMENT numbers are never used twice), and the sequencer
-- takes the queue in order.
CREATE TABLE log_queue (
    n        INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_id text NOT NULL
);
INSERT INTO log_queue (entry_id) SELECT id FROM entries ORDER BY rowid;
-- +goose StatementBegin
CREATE TRIGGER entries_log_queue AFTER INSERT ON entries
BEGIN
    INSERT INTO log_queue (entry_id) VALUES (NEW.id);
END;
-- +goose StatementEnd

-- log_index → the entry and its leaf hash. No foreign key: retention
-- prunes entries and keeps their leaves.
-- pruned: retention deleted the entry and kept its leaf; an entry missing
-- without it was deleted by someone else.
CREATE TABLE log_leaves (
    log_index integer PRIMARY KEY,
    entry_id  text NOT NULL UNIQUE,
    leaf_hash blob NOT NULL,
    pruned    boolean NOT NULL DEFAULT false
);

-- The tree's stored hashes, as golang.org/x/mod/sumdb/tlog numbers them.
CREATE TABLE log_hashes (
    idx  integer PRIMARY KEY,
    hash blob NOT NULL
);

-- The tree's size and the verifier key of the first checkpoint: a
-- replica with another signing key refuses to sign.
CREATE TABLE log_state (
    id           integer PRIMARY KEY CHECK (id = 1),
    size         integer NOT NULL,
    verifier_key text
);
INSERT INTO log_state (id, size) VALUES (1, 0);

-- Every signed checkpoint (a C2SP signed note), by tree size.
CREATE TABLE log_checkpoints (
    size      integer PRIMARY KEY,
    note      text NOT NULL,
    signed_at datetime NOT NULL
);

-- +goose Down
DROP TABLE log_checkpoints;
DROP TABLE log_state;
DROP TABLE log_hashes;
DROP TABLE log_leaves;
DROP TRIGGER entries_log_queue;
DROP TABLE log_queue;
