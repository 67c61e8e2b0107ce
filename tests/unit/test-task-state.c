/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tap.h"
#include "task-state.h"

int main(void) {
        /* Names are the wire format of State and of state files: they must round-trip. */
        for (int s = 0; s < _TASK_STATE_MAX; s++)
                CHECK_INT_EQ(task_state_from_string(task_state_to_string(s)), s, "state %s round-trips", task_state_to_string(s));
        CHECK_INT_EQ(task_state_from_string("bogus"), _TASK_STATE_INVALID, "unknown state name refused");
        CHECK_INT_EQ(task_state_from_string(NULL), _TASK_STATE_INVALID, "NULL state name refused");
        CHECK(task_state_to_string(_TASK_STATE_MAX) == NULL, "out of range state has no name");
        CHECK(task_state_to_string(-1) == NULL, "negative state has no name");

        /* The lifecycle a task takes when all goes well. */
        CHECK(task_state_transition_allowed(TASK_QUEUED, TASK_PREPARING), "queued -> preparing");
        CHECK(task_state_transition_allowed(TASK_PREPARING, TASK_RUNNING), "preparing -> running");
        CHECK(task_state_transition_allowed(TASK_RUNNING, TASK_AWAITING_APPROVAL), "running -> awaiting-approval");
        CHECK(task_state_transition_allowed(TASK_AWAITING_APPROVAL, TASK_RUNNING), "awaiting-approval -> running (approved)");
        CHECK(task_state_transition_allowed(TASK_RUNNING, TASK_DELIVERING), "running -> delivering");
        CHECK(task_state_transition_allowed(TASK_DELIVERING, TASK_SUCCEEDED), "delivering -> succeeded");
        CHECK(task_state_transition_allowed(TASK_FAILED, TASK_QUEUED), "failed -> queued (resume)");

        /* Every unfinished state can be cancelled or fail. */
        for (int s = 0; s < _TASK_STATE_MAX; s++) {
                if (task_state_is_final(s))
                        continue;
                CHECK(task_state_transition_allowed(s, TASK_CANCELLED), "%s -> cancelled", task_state_to_string(s));
                CHECK(task_state_transition_allowed(s, TASK_FAILED), "%s -> failed", task_state_to_string(s));
        }

        /* What must never happen: leaving a final state (except resume of a
         * failed task), skipping the approval, or succeeding without delivery. */
        for (int s = 0; s < _TASK_STATE_MAX; s++) {
                CHECK(!task_state_transition_allowed(TASK_SUCCEEDED, s), "succeeded -/-> %s", task_state_to_string(s));
                CHECK(!task_state_transition_allowed(TASK_CANCELLED, s), "cancelled -/-> %s", task_state_to_string(s));
                CHECK(!task_state_transition_allowed(s, s), "%s -/-> itself", task_state_to_string(s));
                if (s != TASK_DELIVERING)
                        CHECK(!task_state_transition_allowed(s, TASK_SUCCEEDED), "%s -/-> succeeded", task_state_to_string(s));
        }
        CHECK(!task_state_transition_allowed(TASK_QUEUED, TASK_RUNNING), "queued -/-> running");
        CHECK(!task_state_transition_allowed(TASK_QUEUED, TASK_AWAITING_APPROVAL), "queued -/-> awaiting-approval");
        CHECK(!task_state_transition_allowed(TASK_AWAITING_APPROVAL, TASK_DELIVERING), "awaiting-approval -/-> delivering");
        CHECK(!task_state_transition_allowed(TASK_FAILED, TASK_RUNNING), "failed -/-> running");
        /* Pause freezes a task at work and gives it back where it stood;
         * there is nothing to pause in a queued, waiting or delivering task. */
        CHECK(task_state_transition_allowed(TASK_RUNNING, TASK_PAUSED), "running -> paused");
        CHECK(task_state_transition_allowed(TASK_PREPARING, TASK_PAUSED), "preparing -> paused");
        CHECK(task_state_transition_allowed(TASK_PAUSED, TASK_RUNNING), "paused -> running (resume)");
        CHECK(task_state_transition_allowed(TASK_PAUSED, TASK_PREPARING), "paused -> preparing (resume)");
        CHECK(!task_state_transition_allowed(TASK_QUEUED, TASK_PAUSED), "queued -/-> paused");
        CHECK(!task_state_transition_allowed(TASK_AWAITING_APPROVAL, TASK_PAUSED), "awaiting-approval -/-> paused");
        CHECK(!task_state_transition_allowed(TASK_DELIVERING, TASK_PAUSED), "delivering -/-> paused");
        CHECK(!task_state_transition_allowed(TASK_PAUSED, TASK_DELIVERING), "paused -/-> delivering");
        CHECK(!task_state_is_active(TASK_PAUSED) && !task_state_is_final(TASK_PAUSED), "paused is neither active nor final");
        CHECK(!task_state_transition_allowed(-1, TASK_QUEUED), "invalid source refused");
        CHECK(!task_state_transition_allowed(TASK_QUEUED, _TASK_STATE_MAX), "invalid target refused");

        /* Only states where the daemon works keep it from idling out. */
        CHECK(task_state_is_active(TASK_RUNNING) && task_state_is_active(TASK_PREPARING) && task_state_is_active(TASK_DELIVERING),
              "working states are active");
        CHECK(!task_state_is_active(TASK_QUEUED) && !task_state_is_active(TASK_AWAITING_APPROVAL) && !task_state_is_active(TASK_FAILED),
              "waiting and final states are not active");

        return tap_done();
}
