/**
 * What a decision request must satisfy beyond its schema, checked the same way for a real-time
 * request (edge) and a bulk record (sidecar's bulk worker), so both answer with the same 422.
 */
import { requestViolation } from "../contract/budget.ts";
import type { DecisionRequest } from "../contract/decision.ts";
import { ServiceError } from "./errors.ts";

/** The 422 a valid-shaped request still earns (contract/budget.ts requestViolation), or null. */
export function decisionViolation(request: DecisionRequest): ServiceError | null {
  const violation = requestViolation(request);
  return violation ? new ServiceError("invalid_request", violation) : null;
}
