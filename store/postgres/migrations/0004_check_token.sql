-- 0004: airlock_check_token, the check that a token a replica remembers is
-- still live, sent in the same round trip as a call's first statement
-- (postgres/tokencheck.go), so that a call authenticated from memory costs
-- no round trip of its own.
--
-- It raises, rather than returning false, so that the statements sent after
-- it in the same pipeline are skipped: a revoked token's write never runs.
-- SQLSTATE 28000 is invalid_authorization_specification. It compares every
-- field the replica's copy was authorized by, so a token replaced by
-- PutToken (a new hash, role, principal or scopes) fails it too, and the
-- replica looks the token up again on the next call.

CREATE FUNCTION airlock_check_token(p_hash bytea, p_id text, p_role text, p_principal text, p_scopes text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM tokens t
    WHERE t.hash = p_hash AND t.id = p_id AND t.role = p_role AND t.principal = p_principal
        AND t.scopes = p_scopes AND t.revoked_at IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'airlock: the token is unknown, revoked or changed' USING ERRCODE = '28000';
    END IF;
END
$$;
