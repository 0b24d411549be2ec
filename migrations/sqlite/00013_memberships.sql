-- +goose Up
-- A person's roles per namespace: viewer or operator in one namespace, or in
-- every namespace ('*'). Admins (users.role = 'admin') see and decide
-- everywhere whatever their memberships say. Users who were viewers or
-- operators before keep their role everywhere.
CREATE TABLE memberships (
    user_id    text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    namespace  text NOT NULL,
    role       text NOT NULL CHECK (role IN ('viewer', 'operator')),
    created_at datetime NOT NULL,
    PRIMARY KEY (user_id, namespace)
);
INSERT INTO memberships (user_id, namespace, role, created_at)
    SELECT id, '*', role, created_at FROM users WHERE role IN ('viewer', 'operator');

-- When the session's user last gave their password: the most sensitive
-- admin actions ask for it again when this is too long ago.
ALTER TABLE sessions ADD COLUMN authenticated_at datetime NOT NULL DEFAULT '1970-01-01 00:00:00';
UPDATE sessions SET authenticated_at = created_at;

-- +goose Down
ALTER TABLE sessions DROP COLUMN authenticated_at;
DROP TABLE memberships;
