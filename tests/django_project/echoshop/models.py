from django.db import models


class Order(models.Model):
    email = models.EmailField()
    created = models.DateTimeField(auto_now_add=True)


class Receipt(models.Model):
    order = models.OneToOneField(Order, on_delete=models.CASCADE)
    sent_to = models.EmailField()
    attempt = models.IntegerField()
