"""URLs of the reviews features of a session (included under s/<uuid:public_id>/)."""

from __future__ import annotations

from django.urls import path

from sessions import reviews_views

urlpatterns = [
    path("reviews/<int:pk>/answer", reviews_views.review_answer, name="review_answer"),
    path("reviews/<int:pk>/reject", reviews_views.review_reject, name="review_reject"),
    path("reviews/<int:pk>/sampling", reviews_views.sampling_answer, name="review_sampling"),
    path("reviews/<int:pk>/draft", reviews_views.sampling_draft, name="review_draft"),
    path("reviews/<int:pk>/elicitation", reviews_views.elicitation_answer, name="review_elicitation"),
    path("reviews/<int:pk>/consent", reviews_views.elicitation_consent, name="review_consent"),
    path("reviews/<int:pk>/roots", reviews_views.roots_answer, name="review_roots"),
    path("roots", reviews_views.roots_save, name="roots_save"),
]
