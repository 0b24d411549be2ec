-- +goose Up
-- Single sign-on: a person at an OpenID Connect provider is the pair
-- (issuer, subject), which never changes, while their email may. A user
-- signed in through the provider has no local password (password_hash '').
CREATE TABLE identities (
    issuer          text NOT NULL,
    subject         text NOT NULL,
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email           text NOT NULL,
    created_at      timestamptz NOT NULL,
    last_sign_in_at timestamptz NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX identities_user_idx ON identities (user_id);

-- A sign-in sent to the provider and not yet back: found by the SHA-256 of
-- its state, deleted when it comes back, so a state works once.
CREATE TABLE sso_logins (
    state_hash    bytea PRIMARY KEY,
    nonce         text NOT NULL,
    code_verifier text NOT NULL,
    next          text NOT NULL,
    expires_at    timestamptz NOT NULL
);
CREATE INDEX sso_logins_expires_idx ON sso_logins (expires_at);

-- +goose Down
DROP TABLE sso_logins;
DROP TABLE identities;
