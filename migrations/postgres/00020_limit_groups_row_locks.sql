-- +goose Up
-- A group's row is also locked, in the order of the advisory locks, when
-- the ledger reads it under them: a group of intents judged from this
-- process's memory writes its charges in one statement that locks the rows
-- of its groups (FOR UPDATE, in the same order) and writes only if each is
-- still the row it was judged against, so the row lock is what the two
-- ways of charging a group wait on.
-- Each row is found by its key ("= ANY(ARRAY[…])" keeps the planner from
-- hashing the whole table for a few groups). It also answers, as o_next, the earliest charge after the window's new
-- start that counts: until then nothing of the group can leave the window,
-- so the row kept in memory stays exact.
--
-- Each row has a version, new from one sequence on every insert and
-- update whoever writes it, which is what "still the row judged against"
-- compares.
CREATE SEQUENCE limit_groups_version;
ALTER TABLE limit_groups ADD COLUMN version bigint NOT NULL DEFAULT nextval('limit_groups_version');
-- +goose StatementBegin
CREATE FUNCTION limit_groups_versioned() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    NEW.version := nextval('limit_groups_version');
    RETURN NEW;
END
$fn$;
-- +goose StatementEnd
CREATE TRIGGER limit_groups_versioned BEFORE UPDATE ON limit_groups
    FOR EACH ROW EXECUTE FUNCTION limit_groups_versioned();

DROP FUNCTION limit_groups_locked(uuid[], text[], timestamptz[], bigint[], text[]);
-- +goose StatementBegin
CREATE FUNCTION limit_groups_locked(ids uuid[], grps text[], until timestamptz[], locks bigint[], uncounted text[])
RETURNS TABLE (o_i bigint, o_used double precision, o_aged_to timestamptz, o_window integer, o_left double precision,
    o_next timestamptz, o_version bigint)
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
                AND NOT (c.held AND a.status = 'awaiting_approval')) ELSE 0 END,
        (SELECT min(c.charged_at) FROM limit_charges c
            JOIN actions a ON a.id = c.action_id
            WHERE c.limit_id = g.limit_id AND c.group_key = g.group_key
                AND c.charged_at > greatest(g.aged_to, w.until)
                AND a.status <> ALL (uncounted)
                AND NOT (c.held AND a.status = 'awaiting_approval')),
        g.version
    FROM unnest(ids, grps, until) WITH ORDINALITY AS w(limit_id, grp, until, i)
    JOIN limit_groups g ON g.limit_id = ANY(ARRAY[w.limit_id]) AND g.group_key = ANY(ARRAY[w.grp])
    ORDER BY w.i
    FOR UPDATE OF g;
END
$fn$;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER limit_groups_versioned ON limit_groups;
DROP FUNCTION limit_groups_versioned();
ALTER TABLE limit_groups DROP COLUMN version;
DROP SEQUENCE limit_groups_version;
DROP FUNCTION limit_groups_locked(uuid[], text[], timestamptz[], bigint[], text[]);
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
