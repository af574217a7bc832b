-- 0026: edit, then rebind, and what an adapter claims (docs/protocol.md,
-- "Edits" and "What the adapter claims").
--
-- A reviewer who approves a tool call with changed arguments denies the
-- original and creates, in the same transaction, a new request with the
-- edited arguments: the original names the new one (replaced_by) and the
-- new one names the original (derived_from). Both are '' on every other
-- request, and each is written once, by the edit's transaction. The
-- columns are added with constant defaults, which rewrite no row.
ALTER TABLE requests ADD COLUMN IF NOT EXISTS replaced_by text NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN IF NOT EXISTS derived_from text NOT NULL DEFAULT '';

-- Once written, neither changes: the edit's Rebind and Derive already
-- write only an empty one; this makes a future mistake fail loudly, as
-- requests_terminal_is_final does.
CREATE OR REPLACE FUNCTION requests_edit_links_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (OLD.replaced_by <> '' AND NEW.replaced_by IS DISTINCT FROM OLD.replaced_by)
        OR (OLD.derived_from <> '' AND NEW.derived_from IS DISTINCT FROM OLD.derived_from) THEN
        RAISE EXCEPTION 'an edit''s links are written once';
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS requests_edit_links_once ON requests;
CREATE TRIGGER requests_edit_links_once
BEFORE UPDATE OF replaced_by, derived_from ON requests
FOR EACH ROW EXECUTE FUNCTION requests_edit_links_once();

-- What the adapter claims about a tool call, shown beside the facts: a
-- preview of its effect (preview_type 'diff' or 'text', '' for none) and
-- how reversible it is ('reversible', 'partial', 'irreversible', '' for
-- not said). Written at creation, never changed.
ALTER TABLE requests ADD COLUMN IF NOT EXISTS preview_type text NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN IF NOT EXISTS preview_content text NOT NULL DEFAULT '';
ALTER TABLE requests ADD COLUMN IF NOT EXISTS reversibility text NOT NULL DEFAULT '';
