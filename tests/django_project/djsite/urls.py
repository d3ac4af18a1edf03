from django.urls import include, path
from echoshop import views

urlpatterns = [
    path("orders/", views.place_order),
    path("orders/<int:order_id>/", views.order_detail),
    path("ping/", views.ping),
    path("echomq/", include("echomq.contrib.django.dashboard")),
]
