-- +goose Up
CREATE TABLE users (
    id            uuid PRIMARY KEY,
    email         text NOT NULL UNIQUE,
    role          text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    password_hash text NOT NULL,
    disabled_at   timestamptz,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);

-- A session is found by the SHA-256 of its token; the token itself lives
-- only in the browser's cookie.
CREATE TABLE sessions (
    token_hash   bytea PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token   text NOT NULL,
    created_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    address      text NOT NULL,
    user_agent   text NOT NULL
);
CREATE INDEX sessions_user_idx ON sessions (user_id);
CREATE INDEX sessions_expires_idx ON sessions (expires_at);

-- Failed sign-ins per account and per address, for throttling.
CREATE TABLE sign_in_failures (
    subject      text PRIMARY KEY,
    failures     integer NOT NULL,
    window_start timestamptz NOT NULL,
    locked_until timestamptz
);

-- +goose Down
DROP TABLE sign_in_failures;
DROP TABLE sessions;
DROP TABLE users;
