-- +goose Up
-- Each (limit, group)'s counted use, kept as charges come, as their
-- actions start or stop counting and as the window slides, so that judging
-- an intent reads one row instead of summing the group's window: used is
-- the sum of the group's counting charges charged after aged_to. A group
-- without a row, or kept for another window, is summed from its charges
-- when it is next read.
CREATE TABLE limit_groups (
    limit_id       uuid NOT NULL,
    group_key      text NOT NULL,
    used           double precision NOT NULL,
    aged_to        timestamptz NOT NULL,
    window_seconds integer NOT NULL,
    PRIMARY KEY (limit_id, group_key)
);

-- The groups' rows, each with what left its window by until[i] (the
-- charges after aged_to and at or before it whose actions' statuses are
-- not among uncounted, nor held while awaiting approval), read after taking
-- the groups' advisory locks in the order given: in one call, and still
-- after the locks, since each statement of a volatile function takes a
-- new snapshot (it sees what a lock's previous holder committed).
-- +goose StatementBegin
CREATE FUNCTION limit_groups_locked(ids uuid[], grps text[], until timestamptz[], locks bigint[], uncounted text[])
RETURNS TABLE (o_i bigint, o_used double precision, o_aged_to timestamptz, o_window integer, o_left double precision)
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock(k) FROM unnest(locks) AS t(k);
    RETURN QUERY
    SELECT w.i, g.used, g.aged_to, g.window_seconds,
        CASE WHEN w.until > g.aged_to THEN (SELECT coalesce(sum(c.amount), 0) FROM limit_charges c
            JOIN actions a ON a.id = c.action_id
            WHERE c.limit_id = g.limit_id AND c.group_key = g.group_key
                AND c.charged_at > g.aged_to AND c.charged_at <= w.until
                AND a.status <> ALL (uncounted)
                AND NOT (c.held AND a.status = 'awaiting_approval')) ELSE 0 END
    FROM unnest(ids, grps, until) WITH ORDINALITY AS w(limit_id, grp, until, i)
    JOIN limit_groups g ON g.limit_id = w.limit_id AND g.group_key = w.grp;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION limit_groups_locked(uuid[], text[], timestamptz[], bigint[], text[]);
DROP TABLE limit_groups;
