-- +goose Up
-- The evidence log (SPEC "Evidence"): every entry is a leaf of one Merkle
-- tree. Entries join it in the order of their transactions: each entry
-- keeps the id of the transaction that wrote it, and the sequencer logs
-- only entries of transactions below the oldest one still running, so an
-- entry that commits late is not passed over. A BRIN index keeps that
-- cheap to write.
ALTER TABLE entries ADD COLUMN txid bigint NOT NULL DEFAULT (pg_current_xact_id()::text::bigint);
CREATE INDEX entries_txid_idx ON entries USING brin (txid);

-- log_index → the entry and its leaf hash. No foreign key: retention
-- prunes entries and keeps their leaves.
-- pruned: retention deleted the entry and kept its leaf; an entry missing
-- without it was deleted by someone else.
CREATE TABLE log_leaves (
    log_index bigint PRIMARY KEY,
    entry_id  uuid NOT NULL UNIQUE,
    leaf_hash bytea NOT NULL,
    pruned    boolean NOT NULL DEFAULT false
);

-- The tree's stored hashes, as golang.org/x/mod/sumdb/tlog numbers them.
CREATE TABLE log_hashes (
    idx  bigint PRIMARY KEY,
    hash bytea NOT NULL
);

-- One row: the tree's size, where the sequencer is (the last entry logged,
-- by transaction and id), and the verifier key of the first checkpoint: a
-- replica with another signing key refuses to sign.
CREATE TABLE log_state (
    id           smallint PRIMARY KEY CHECK (id = 1),
    size         bigint NOT NULL,
    cursor_txid  bigint NOT NULL,
    cursor_id    uuid,
    verifier_key text
);
INSERT INTO log_state (id, size, cursor_txid) VALUES (1, 0, 0);

-- Every signed checkpoint (a C2SP signed note), by tree size.
CREATE TABLE log_checkpoints (
    size      bigint PRIMARY KEY,
    note      text NOT NULL,
    signed_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE log_checkpoints;
DROP TABLE log_state;
DROP TABLE log_hashes;
DROP TABLE log_leaves;
DROP INDEX entries_txid_idx;
ALTER TABLE entries DROP COLUMN txid;
