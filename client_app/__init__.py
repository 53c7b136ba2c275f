"""client_app"""
