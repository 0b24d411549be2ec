// What a framework adapter tells the model instead of the tool's result
// when the ledger did not let the call run now, or its outcome is unknown.
// The texts are sdk/vectors.json "model_messages" (test/vectors.test.js
// holds them equal); no text invites the model to call the tool again.

/** The kinds of answer a model is told about. */
export type ModelMessageKind =
  | "pending_approval"
  | "denied"
  | "limit_exceeded"
  | "frozen"
  | "held"
  | "in_progress"
  | "outcome_unknown"
  | "finished"
  | "failed"
  | "key_reused"
  | "confirmed_without_result"
  | "compensated";

/** sdk/vectors.json "model_messages".messages, word for word. */
export const MODEL_MESSAGES: Readonly<Record<ModelMessageKind, string>> = {
  pending_approval:
    "Not done yet: this call is waiting for a person's approval. Do not call the tool again; tell the user it needs approval ({action_url}). {detail}",
  denied: "Refused: a person rejected this call, or its approval expired. It will not run. Do not call the tool again; tell the user it was refused. {detail}",
  limit_exceeded:
    "Refused: this call would go over a limit set on such actions (a budget or a rate), so it will not run. Do not call the tool again to get around it, not with other details either; tell the user a limit refused it and that a person can change the limit ({action_url}). {detail}",
  frozen: "Not done: a person has frozen such actions for now (a freeze: {detail}). Nothing ran. Do not call the tool again now and do not work around it; tell the user it is paused until a person lifts the freeze ({action_url}).",
  held: "Not done: an earlier attempt's outcome is unknown and a person is checking it. Do not call the tool again; tell the user it is being checked ({action_url}). {detail}",
  in_progress: "Not done now: another attempt of this call is still running. Do not call the tool again; tell the user it is already under way. {detail}",
  outcome_unknown:
    "Unknown: the call was made but its outcome could not be seen (it may have taken effect). A person will check it. Do not call the tool again; tell the user it is being checked ({action_url}). {detail}",
  finished: "Not done: this action ended earlier without its effect, and it is not run again. Do not call the tool again; tell the user it did not happen. {detail}",
  failed: "Not done: the call failed and did not take effect. {detail}",
  key_reused:
    "Refused: an action with the same business identity but different details already exists. Do not call the tool again with other details; tell the user a person must look at it ({action_url}). {detail}",
  confirmed_without_result: "Done: a person confirmed that this call took effect; no result was recorded.",
  compensated: "Undone: this call took effect earlier and was then reversed. Do not call the tool again; tell the user it was reversed.",
};

/**
 * The model's message of kind: {detail} replaced by detail (when empty,
 * the text ends at the sentence before it), {action_url} by the action's
 * dashboard link, or "the Arbiter dashboard" when there is none.
 */
export function modelMessage(kind: ModelMessageKind, detail = "", actionUrl = ""): string {
  const text = MODEL_MESSAGES[kind].replaceAll("{action_url}", actionUrl || "the Arbiter dashboard");
  return detail.trim() ? text.replaceAll("{detail}", detail.trim()) : text.replaceAll("{detail}", "").trimEnd();
}
