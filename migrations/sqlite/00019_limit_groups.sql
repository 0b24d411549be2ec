-- +goose Up
-- Each (limit, group)'s counted use, kept as charges come, as their
-- actions start or stop counting and as the window slides, so that judging
-- an intent reads one row instead of summing the group's window: used is
-- the sum of the group's counting charges charged after aged_to. A group
-- without a row, or kept for another window, is summed from its charges
-- when it is next read.
CREATE TABLE limit_groups (
    limit_id       text NOT NULL,
    group_key      text NOT NULL,
    used           double precision NOT NULL,
    aged_to        datetime NOT NULL,
    window_seconds integer NOT NULL,
    PRIMARY KEY (limit_id, group_key)
);

-- +goose Down
DROP TABLE limit_groups;
